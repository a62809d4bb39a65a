"""The Bench screen in a small host app, driven by Pilot, with the real engine on the bundled model."""

from __future__ import annotations

import re
import threading

from fakes import wait_until
from textual.app import App
from textual.widgets import DataTable, Static

from workbench.core.bench.report import read_results
from workbench.core.bench.sweep import shipped_eval_text
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset
from workbench.ui.messages import BenchSweepFailed, TaskBenchEnded
from workbench.ui.screens.bench_screen import BenchScreen, sweep_in_thread
from workbench.ui.screens.task_bench_screen import task_sweep_in_thread


class BenchHost(App):
    def __init__(self, screen: BenchScreen) -> None:
        super().__init__()
        self.bench = screen

    def on_mount(self) -> None:
        self.push_screen(self.bench)


def _status(screen: BenchScreen) -> str:
    return str(screen.query_one("#bench-status", Static).render())


async def test_bench_screen_runs_a_sweep_live_and_saves_every_format(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    presets = [
        Preset(name="f16-cache", ctx_size=256),
        Preset(name="q8-cache", ctx_size=256, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True),
    ]
    screen = BenchScreen(
        bundled_model_path(), "host", presets, n_prompt=8, n_gen=8, repetitions=1,
        eval_text=shipped_eval_text()[:400], ppl_ctx=64, out_dir=tmp_path / "results",
    )
    async with BenchHost(screen).run_test(size=(180, 50)) as pilot:
        table = screen.query_one("#bench-table", DataTable)
        await pilot.pause(1.5)
        assert screen.rows == [] and "Start" in _status(screen)  # nothing runs before Start
        await pilot.click("#bench-start")
        await wait_until(pilot, lambda: table.row_count >= 1, 120)  # the first row shows before the sweep ends
        await wait_until(pilot, lambda: screen.results is not None, 120)
        await pilot.pause()
        assert table.row_count == 2
        assert [str(table.get_row_at(i)[0]) for i in range(2)] == ["f16-cache", "q8-cache"]
        assert _status(screen).startswith("done: 2 presets")
        assert sorted(path.suffix for path in screen.saved_files) == [".csv", ".json", ".jsonl", ".md"]
        assert read_results(next(p for p in screen.saved_files if p.suffix == ".json")) == screen.results
        notes = str(screen.query_one("#bench-notes", Static).render())
        # every "n/a [k]" cell has its footnote line "[k] columns: reason", and there is no other line
        cells = [str(cell) for i in range(table.row_count) for cell in table.get_row_at(i)]
        cited = {int(number) for cell in cells for number in re.findall(r"n/a \[(\d+)\]", cell)}
        noted = {int(number) for number in re.findall(r"^\[(\d+)\] ", notes, flags=re.MULTILINE)}
        assert noted == cited
        assert all(re.fullmatch(r"n/a \[\d+\]", cell) for cell in cells if cell.startswith("n/a"))  # never bare


async def test_bench_screen_reports_a_bad_preset_in_one_line_and_escape_leaves(tmp_path):
    screen = BenchScreen(bundled_model_path(), "host", ["no-such-preset"], out_dir=tmp_path)
    app = BenchHost(screen)
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.click("#bench-start")
        await wait_until(pilot, lambda: "could not run" in _status(screen), 120)
        assert "no-such-preset" in _status(screen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is not screen, 120)
        assert screen.cancel_event.is_set()
    assert not list(tmp_path.iterdir())  # nothing measured, nothing saved


async def test_bench_screen_opens_on_a_form_checks_it_and_shows_elapsed_time_in_a_step(tmp_path, monkeypatch):
    """Start reads the form; a bad value is one line; a running step's status moves every second."""
    started = []
    monkeypatch.setattr(BenchScreen, "run_sweep", lambda self: started.append(
        (self.presets, self.n_prompt, self.n_gen, self.repetitions)))
    screen = BenchScreen(bundled_model_path(), "host", ["as-is"], out_dir=tmp_path)
    async with BenchHost(screen).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for widget_id in ("#bench-presets", "#bench-n-prompt", "#bench-n-gen", "#bench-repetitions", "#bench-start"):
            region = screen.query_one(widget_id).region
            assert region.width > 0 and region.right <= 80 and region.bottom < 24, widget_id  # usable at 80x24
        screen.query_one("#bench-repetitions").value = "0"
        await pilot.click("#bench-start")
        # Start runs when Button.Pressed reaches the screen: wait for its answer, not for a moment
        await wait_until(pilot, lambda: "whole numbers of 1 or more" in _status(screen), 120)
        assert started == []
        screen.query_one("#bench-presets").value = "as-is, quality-q8"
        screen.query_one("#bench-n-prompt").value = "32"
        screen.query_one("#bench-repetitions").value = "1"
        screen.query_one("#bench-presets").focus()
        await pilot.press("enter")  # Enter in the form is Start
        await wait_until(pilot, lambda: started, 120)
        assert started == [(("as-is", "quality-q8"), 32, 128, 1)]
        from workbench.ui.screens.bench_screen import BenchStepStarted

        screen.post_message(BenchStepStarted("as-is", "perplexity", 3, 8))
        await wait_until(pilot, lambda: "perplexity" in _status(screen), 120)
        await wait_until(pilot, lambda: "s in this step" in _status(screen), 120)
        first = _status(screen)
        await wait_until(pilot, lambda: _status(screen) != first, 120)  # the elapsed time moves


def test_the_sweep_workers_take_their_settings_as_arguments_and_only_post():
    """Each worker body runs without its screen: what it needs comes as arguments, what it finds is posted."""
    posted = []
    sweep_in_thread(bundled_model_path(), ("no-such-preset",), "host", 8, 8, 1, None, 64, threading.Event(),
                    posted.append)
    assert [type(message) for message in posted] == [BenchSweepFailed] and "no-such-preset" in posted[0].message
    posted.clear()
    task_sweep_in_thread(bundled_model_path(), ("as-is",), "host", "no-such-task", (1,), 1, threading.Event(),
                         posted.append)
    assert [type(message) for message in posted] == [TaskBenchEnded] and "no-such-task" in posted[0].error
