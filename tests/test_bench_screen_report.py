"""The bench screen's charts (the report's three, in plotext, each bar with its value) and its Export report button,
driven by Pilot with the results of a finished sweep (the message the sweep's worker posts, holding a bench file's rows)."""

from __future__ import annotations

import re

from fakes import wait_until
from report_files import BOARD_BUDGET_MB, BOARD_ROWS, machine, row
from test_bench_screen import BenchHost  # the screen pushed in a bare app
from textual.widgets import Button, Static
from textual_plotext import PlotextPlot

from workbench.core.bench.report import BenchResults
from workbench.core.paths import bundled_model_path
from workbench.ui.messages import BenchSweepFinished
from workbench.ui.screens.bench_screen import BenchScreen


def _plot_text(screen: BenchScreen, name: str) -> str:
    plot = screen.query_one(f"#bench-plot-{name}", PlotextPlot)
    return re.sub(r"\x1b\[[0-9;]*m", "", plot.plt.build())


async def test_the_charts_label_each_value_and_export_writes_the_report(tmp_path):
    results = BenchResults(machine("raspberry-pi-5-8gb", BOARD_BUDGET_MB), tuple(row(*spec) for spec in BOARD_ROWS))
    screen = BenchScreen(bundled_model_path(), "raspberry-pi-5-8gb", ["quality-q8", "balanced-q4km"],
                         out_dir=tmp_path)
    async with BenchHost(screen).run_test(size=(160, 48)) as pilot:
        export = screen.query_one("#bench-export", Button)
        assert export.disabled  # nothing to export before a sweep finished
        screen.post_message(BenchSweepFinished(results, (), False))
        await wait_until(pilot, lambda: not export.disabled, 30)
        speed, quality, memory = (_plot_text(screen, name) for name in ("speed", "quality", "memory"))
        for preset, decode, _, ppl, peak, predicted in BOARD_ROWS:  # each bar and point says its value
            assert f"{decode:.1f}|{predicted:.1f}" in speed
            assert f"{preset[:9]}… {ppl:.3f}" in quality or f"{preset} {ppl:.3f}" in quality
        # 300 MiB is over the 270 MiB budget; 250 leaves 20 MiB, under a tenth of it: tight
        assert "300 does not fit" in memory and "250 tight" in memory and "of the 270 budget" in memory
        await pilot.click("#bench-export")
        await wait_until(pilot, lambda: "report written" in str(screen.query_one("#bench-status", Static).render()), 60)
    html = next(tmp_path.glob("bench-*.html"))
    page = html.read_text()
    assert sorted(re.findall(r'data-chart="(\w+)"', page)) == ["memory", "quality", "speed"]
    assert "is a board simulated on" in page
