"""The app's parts of the task bench: the chat's "N samples, vote" mode on the real engine, the triangle plot."""

import dataclasses

from fakes import wait_until
from textual.app import App, ComposeResult

from workbench.core.paths import bundled_model_path
from workbench.core.tasks.results import TaskRow
from workbench.ui.app import WorkbenchApp
from workbench.ui.engine_session import LOADED
from workbench.ui.selection import Selection
from workbench.ui.widgets.chat_view import AnswerBlock
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.triangle_plot import TrianglePlot, series
from workbench.ui.widgets.vote_view import VoteView


async def test_chat_vote_mode_samples_together_and_shows_the_tally():
    app = WorkbenchApp(Selection(model_path=bundled_model_path(), preset_name="as-is", device_name="host"),
                       telemetry_interval_s=0.5)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None, 60)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        await pilot.press("ctrl+t")  # 1 -> 3 samples
        assert screen.chat_pane.vote_mode.samples == 3
        screen.conversation.sampling = dataclasses.replace(screen.conversation.sampling, seed=5, max_tokens=12)
        prompt = screen.query_one(PromptInput)
        prompt.value = "What is 2 + 3? Reply with the number only."
        prompt.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 2 and screen.phase == LOADED, 180)
        answer = list(screen.query(AnswerBlock))[-1]
        views = list(answer.query(VoteView))
        assert len(views) == 1
        vote = views[0].vote
        # three samples voted (or said nothing to vote on), and the winner is the conversation's answer
        assert sum(c.votes for c in vote.counts) + vote.unparseable == 3
        finished = screen.conversation.stats[1]
        assert finished.text == screen.conversation.messages[1].content
        assert finished.prompt_tokens > 0 and finished.generated_tokens >= 1
        await pilot.press("ctrl+l")


def row(preset, n, seconds, accuracy, joules=None):
    return TaskRow(task="add-small", preset=preset, weights="keep", model="m", device="host", samples=n,
                   questions=10, correct=int(accuracy * 10), accuracy=accuracy, accuracy_ci=(0.0, 1.0), unparseable=0,
                   seconds_per_question=seconds, tokens_per_question=3.0 * n, joules_per_question=joules,
                   power_w=None if joules is None else 5.0, n_threads=1,
                   unavailable=() if joules is not None else (("joules_per_question", "no power source on this machine"),))


def test_series_groups_points_by_preset_in_order_of_n():
    rows = [row("a", 4, 1.2, 0.7), row("a", 1, 0.4, 0.5), row("b", 1, 0.3, 0.4)]
    grouped = series(rows, "seconds_per_question")
    assert grouped["a t1"] == ([0.4, 1.2], [0.5, 0.7], [1, 4])
    assert series(rows, "joules_per_question") == {}


class PlotApp(App):
    def compose(self) -> ComposeResult:
        yield TrianglePlot()


async def test_triangle_plot_says_why_energy_is_missing():
    app = PlotApp()
    async with app.run_test(size=(120, 30)) as pilot:
        plot = app.query_one(TrianglePlot)
        plot.show([row("a", 1, 0.4, 0.5), row("a", 8, 1.5, 0.8)])
        await pilot.pause()
        missing = plot.query_one("#triangle-energy-missing")
        assert missing.display and "no power source on this machine" in str(missing.content)
        plot.show([row("a", 1, 0.4, 0.5, joules=2.0)])
        await pilot.pause()
        assert not missing.display and plot.query_one("#triangle-energy").display


async def test_task_bench_screen_runs_the_real_engine_and_plots(tmp_path, monkeypatch):
    from workbench.core.config.preset import Preset
    from workbench.ui.screens.task_bench_screen import TaskBenchScreen

    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    preset = Preset("task-ui", ctx_size=512, batch_size=256, ubatch_size=256, threads=1)
    screen = TaskBenchScreen(bundled_model_path(), "host", (preset,), samples=(1, 2), limit=2)

    class ScreenApp(App):
        def on_mount(self) -> None:
            self.push_screen(screen)

    app = ScreenApp()
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: "done" in str(screen.query_one("#task-status").content), 300)
        assert [r.samples for r in screen.rows] == [1, 2]
        assert screen.query_one("#task-table").row_count == 2
        assert screen.query_one(TrianglePlot).rows == tuple(screen.rows)
        assert "Pareto front" in str(screen.query_one("#task-status").content)
