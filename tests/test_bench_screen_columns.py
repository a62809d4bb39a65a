"""At 80x24 the bench table shows what a sweep compares first (decode, perplexity, their deltas); every column is
still there, each cell under its own header, and the table scrolls sideways to the rest."""

import dataclasses

from fakes import wait_until
from test_bench_report import _row
from textual.app import App
from textual.widgets import DataTable

from workbench.core.bench.report import MD_COLUMNS
from workbench.core.paths import bundled_model_path
from workbench.ui.messages import BenchRowMeasured
from workbench.ui.screens.bench_screen import BenchScreen


class Host(App):
    def __init__(self, screen) -> None:
        super().__init__()
        self.bench = screen

    def on_mount(self) -> None:
        self.push_screen(self.bench)


async def test_decode_and_perplexity_are_on_screen_at_80x24(tmp_path):
    screen = BenchScreen(bundled_model_path(), "host", ["as-is"], out_dir=tmp_path)
    async with Host(screen).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        row = dataclasses.replace(_row("q8", 150_000_000, 48.25, 12.345), ppl_delta=0.125, speedup=1.5)
        screen.post_message(BenchRowMeasured(row))
        table = screen.query_one("#bench-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 1)
        await pilot.pause()
        headers = [str(column.label) for column in table.ordered_columns]
        assert sorted(headers) == sorted(header for header, _, _ in MD_COLUMNS)  # none dropped
        visible, right = [], 0
        for column in table.ordered_columns:
            right += column.get_render_width(table)
            if right <= table.scrollable_content_region.width:
                visible.append(str(column.label))
        for header in ("preset", "decode t/s", "ppl"):
            assert header in visible, (header, visible)
        cells = dict(zip(headers, (str(cell) for cell in table.get_row_at(0))))
        assert cells["decode t/s"] == "48.25 ± 0.25" and cells["ppl"] == "12.345" and cells["preset"] == "q8"
        assert cells["Δppl"] == "+0.125" and cells["speedup"] == "1.50×"
        table.focus()
        await pilot.press("end")  # the cursor to the last column: the table scrolls sideways
        await wait_until(pilot, lambda: table.scroll_x > 0)
