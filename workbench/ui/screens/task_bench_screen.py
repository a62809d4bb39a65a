"""The task bench screen: N samples voted per question, per preset; a live table and the triangle plots."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from workbench.core.bench.task_sweep import (
    TaskPointMeasured,
    TaskStepStarted,
    TaskSweepConfig,
    TaskSweepFinished,
    run_task_sweep,
)
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.errors import WorkbenchError
from workbench.core.tasks.registry import find_task
from workbench.core.tasks.results import TaskRow
from workbench.ui.messages import TaskBenchEnded, TaskRowMeasured, TaskStepped
from workbench.ui.selection import device_from, preset_from
from workbench.ui.widgets.triangle_plot import TrianglePlot

COLUMNS = ("preset", "N", "threads", "accuracy", "95% CI", "unparsed", "s/question", "tokens/question", "J/question")


def row_cells(row: TaskRow) -> tuple[str, ...]:
    joules = f"{row.joules_per_question:.2f}" if row.joules_per_question is not None else "n/a"
    return (row.preset, str(row.samples), str(row.n_threads), f"{row.accuracy:.2f} ({row.correct}/{row.questions})",
            f"{row.accuracy_ci[0]:.2f}-{row.accuracy_ci[1]:.2f}", str(row.unparseable),
            f"{row.seconds_per_question:.2f}", f"{row.tokens_per_question:.1f}", joules)


class TaskBenchScreen(Screen):
    """Runs `workbench bench --task` for the bench screen's model, presets and device."""

    CSS_PATH = "task_bench_screen.tcss"
    BINDINGS = [Binding("escape", "leave", "Back (stops the sweep)")]

    def __init__(self, model_path: str | Path, device: DeviceProfile | str, presets: Sequence[Preset | str],
                 task: str = "add-small", samples: tuple[int, ...] = (1, 2, 4, 8), limit: int = 20) -> None:
        super().__init__()
        self.model_path, self.device, self.presets = Path(model_path), device, tuple(presets)
        self.task_name, self.samples, self.limit = task, tuple(samples), limit
        self.cancel_event = threading.Event()
        self.rows: list[TaskRow] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Task bench  {self.task_name} on {self.model_path.name}: N samples voted per question",
                         id="task-title")
            yield ProgressBar(total=None, show_eta=False, id="task-progress")
            yield Static("starting…", id="task-status")
            yield DataTable(id="task-table", zebra_stripes=True)
            yield TrianglePlot(id="task-plot")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#task-table", DataTable).add_columns(*COLUMNS)
        self.run_task()

    def run_task(self) -> None:
        """Start the sweep in a thread worker: it gets the screen's settings as arguments, never the screen."""
        self.run_worker(partial(task_sweep_in_thread, self.model_path, self.presets, self.device, self.task_name,
                                self.samples, self.limit, self.cancel_event, self.post_message),
                        thread=True, exclusive=True, group="task-bench")

    def on_task_stepped(self, message: TaskStepped) -> None:
        self.query_one("#task-progress", ProgressBar).update(total=message.total, progress=message.done)
        self.query_one("#task-status", Static).update(message.label)

    def on_task_row_measured(self, message: TaskRowMeasured) -> None:
        self.rows.append(message.row)
        self._show()

    def on_task_bench_ended(self, message: TaskBenchEnded) -> None:
        status = self.query_one("#task-status", Static)
        if message.error:
            status.update(f"task bench could not run: {message.error}")
            self.notify(message.error, title="task bench", severity="error", timeout=10)
            return
        self.rows = list(message.rows)
        self._show()
        front = ", ".join(f"{r.preset} N={r.samples}" for r in self.rows if r.pareto_latency) or "none"
        failed = f"; {len(message.failures)} failed" if message.failures else ""
        status.update(f"done{failed}. Pareto front (accuracy vs latency): {front}")
        for failure in message.failures:
            self.notify(failure, title="task point failed", severity="error", timeout=10)

    def _show(self) -> None:
        table = self.query_one("#task-table", DataTable)
        table.clear()
        for row in self.rows:
            table.add_row(*row_cells(row))
        self.query_one(TrianglePlot).show(self.rows)

    def action_leave(self) -> None:
        self.cancel_event.set()
        self.dismiss(tuple(self.rows))


def task_sweep_in_thread(model_path: Path, presets: tuple[Preset | str, ...], device: DeviceProfile | str,
                         task_name: str, samples: tuple[int, ...], limit: int, cancel: threading.Event,
                         post: Callable[[Message], object]) -> None:
    """Worker body: the task sweep, off the event loop (presets, device and task resolved here); only posts."""
    try:
        config = TaskSweepConfig(model_path=model_path, presets=tuple(preset_from(p) for p in presets),
                                 device=device_from(device), task=find_task(task_name), samples=samples, limit=limit)
        for event in run_task_sweep(config, cancel):
            if isinstance(event, TaskStepStarted):
                post(TaskStepped(event.label, event.done, event.total))
            elif isinstance(event, TaskPointMeasured):
                post(TaskRowMeasured(event.row))
            elif isinstance(event, TaskSweepFinished):
                failures = tuple(f"{f.label}: {f.message}" for f in event.failures)
                post(TaskBenchEnded(event.rows, failures))
    except WorkbenchError as error:
        post(TaskBenchEnded((), error=str(error)))
