"""The Bench screen: runs a preset sweep in a thread worker with a live table and plots, saves results."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, ProgressBar, Static

from workbench.core.bench.report import (
    FORMATS,
    MD_COLUMNS,
    BenchResults,
    footnote_lines,
    md_cells,
    write_results,
)
from workbench.core.bench.report_model import ReportRow, report_row
from workbench.core.bench.rows import BenchRow
from workbench.core.bench.sweep import (
    PresetFailed,
    PresetMeasured,
    SweepConfig,
    SweepFinished,
    SweepStepStarted,
    run_sweep,
)
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.errors import WorkbenchError
from workbench.core.units import MIB
from workbench.ui.messages import (
    BenchPresetFailed,
    BenchReportExported,
    BenchReportFailed,
    BenchRowMeasured,
    BenchStepStarted,
    BenchSweepFailed,
    BenchSweepFinished,
)
from workbench.ui.screens.task_bench_screen import TaskBenchScreen
from workbench.ui.selection import device_from, preset_from
from workbench.ui.widgets.bench_charts import BenchCharts

# The table on screen puts what a sweep compares first (80 columns show about six): the rest follow in the
# report's order, reached by scrolling the table sideways. The saved files keep the report's order.
SCREEN_FIRST = ("preset", "decode t/s", "ppl", "Δppl", "speedup", "vs reference", "prefill t/s", "TTFT ms",
                "peak MiB", "expected RSS MiB")
HEADERS = tuple(header for header, _, _ in MD_COLUMNS)
SCREEN_ORDER = tuple([HEADERS.index(h) for h in SCREEN_FIRST if h in HEADERS]
                     + [i for i, h in enumerate(HEADERS) if h not in SCREEN_FIRST])


class BenchScreen(Screen):
    """Sweeps `presets` on `model_path` for `device`; the same rows and files as `workbench bench`."""

    CSS_PATH = "bench_screen.tcss"
    BINDINGS = [Binding("escape", "leave", "Back (stops the sweep)"),
                Binding("t", "task_bench", "Task bench (accuracy per N)")]

    def __init__(
        self,
        model_path: str | Path,
        device: DeviceProfile | str = "host",
        presets: Sequence[Preset | str] = ("quality-q8", "balanced-q4km"),
        *,
        n_prompt: int = 256,
        n_gen: int = 128,
        repetitions: int = 3,
        eval_text: str | None = None,
        ppl_ctx: int = 512,
        out_dir: str | Path | None = None,
        name: str | None = None,
        unsaved: dict[str, Preset] | None = None,
        note: str = "",
    ) -> None:
        super().__init__(name=name)
        self.unsaved = dict(unsaved or {})  # edits used without saving, by their label: they run as they are
        self.note = note  # what became of the chat model's engine
        self.model_path = Path(model_path)
        self.device = device
        self.presets = tuple(presets)
        self.n_prompt, self.n_gen, self.repetitions = n_prompt, n_gen, repetitions
        self.eval_text, self.ppl_ctx = eval_text, ppl_ctx
        self.out_dir = Path(out_dir) if out_dir is not None else Path.cwd()
        self.cancel_event = threading.Event()
        self.rows: list[BenchRow] = []
        self.results: BenchResults | None = None
        self.saved_files: tuple[Path, ...] = ()

    def compose(self) -> ComposeResult:
        with Vertical(id="bench-body"):
            yield Static(f"Bench  {self.model_path.name}", id="bench-title")
            # nothing runs until Start: a full sweep takes minutes and loads the engine several times
            with Horizontal(id="bench-settings"):
                yield Label("presets")
                yield Input(", ".join(p if isinstance(p, str) else p.name for p in self.presets),
                            id="bench-presets", compact=True)
                yield Label("-p")
                yield Input(str(self.n_prompt), id="bench-n-prompt", type="integer", compact=True)
                yield Label("-n")
                yield Input(str(self.n_gen), id="bench-n-gen", type="integer", compact=True)
                yield Label("-r")
                yield Input(str(self.repetitions), id="bench-repetitions", type="integer", compact=True)
                yield Button("Start", id="bench-start", variant="primary", compact=True)
                yield Button("Export report", id="bench-export", disabled=True, compact=True)
            yield ProgressBar(total=None, show_eta=False, id="bench-progress")
            yield Static("Choose the presets and sizes, then Start (Enter). Each preset loads in a fresh engine: "
                         "speed runs, then perplexity." + (f"\n{self.note}" if self.note else ""), id="bench-status")
            yield DataTable(id="bench-table", zebra_stripes=True)
            yield Static("", id="bench-notes")
            yield BenchCharts(id="bench-plots")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#bench-table", DataTable)
        table.add_columns(*(HEADERS[i] for i in SCREEN_ORDER))
        self._draw_plots()
        self.query_one("#bench-progress", ProgressBar).update(total=100, progress=0)
        self.query_one("#bench-start", Button).focus()
        self._step_started_at: float | None = None
        self._step_text = ""
        # a step (perplexity above all) can take a minute: its elapsed time moves every second
        self.set_interval(1.0, self._tick)

    @on(Button.Pressed, "#bench-start")
    @on(Input.Submitted)
    def start(self) -> None:
        """Read the form; a bad value is one line in the status, and nothing starts."""
        try:
            presets = tuple(name.strip() for name in self.query_one("#bench-presets", Input).value.split(",")
                            if name.strip())
            sizes = [int(self.query_one(f"#{field}", Input).value or "0")
                     for field in ("bench-n-prompt", "bench-n-gen", "bench-repetitions")]
        except ValueError:
            sizes = [0]
            presets = ()
        if not presets or min(sizes) < 1:
            self._status("✘ name at least one preset, and give -p, -n and -r as whole numbers of 1 or more")
            return
        # presets made in code and unsaved edits stay objects: their names are no file's
        given = {**self.unsaved, **{p.name: p for p in self.presets if isinstance(p, Preset)}}
        lost = [name for name in presets if name not in given and name.endswith((" (edited)", " (unsaved)"))]
        if lost:
            self._status(f"✘ {lost[0]} is an edit used without saving, no longer in this session: save it in F3 "
                         "(Presets) under a name and give that name here")
            return
        self.presets = tuple(given.get(name, name) for name in presets)
        self.n_prompt, self.n_gen, self.repetitions = sizes
        for widget in self.query("#bench-settings Input, #bench-settings Button"):
            widget.disabled = True
        self.query_one("#bench-progress", ProgressBar).update(total=None)
        self._status("starting…")
        self.run_sweep()

    def _tick(self) -> None:
        if self._step_started_at is not None and self.results is None:
            elapsed = time.monotonic() - self._step_started_at
            self._status(f"{self._step_text}  · {elapsed:,.0f} s in this step")

    def run_sweep(self) -> None:
        """Start the sweep in a thread worker: it gets the form's values as arguments, never the screen."""
        self.run_worker(partial(sweep_in_thread, self.model_path, self.presets, self.device, self.n_prompt,
                                self.n_gen, self.repetitions, self.eval_text, self.ppl_ctx, self.cancel_event,
                                self.post_message),
                        thread=True, exclusive=True, group="bench")

    def on_bench_step_started(self, message: BenchStepStarted) -> None:
        self.query_one("#bench-progress", ProgressBar).update(total=message.total_steps,
                                                              progress=message.done_steps + message.fraction)
        step = f"{message.preset}: {message.step}"
        if message.fraction <= 0 or not self._step_text.startswith(step):
            self._step_started_at = time.monotonic()  # a new step; progress within one keeps its clock
        done = f" {message.fraction:.0%}" if message.fraction > 0 else ""
        self._step_text = f"{step}{done}  ({message.done_steps}/{message.total_steps})"
        self._status(self._step_text)

    def on_bench_row_measured(self, message: BenchRowMeasured) -> None:
        self.rows.append(message.row)
        self._show_rows(self.rows)

    def on_bench_preset_failed(self, message: BenchPresetFailed) -> None:
        self.notify(message.message, title=f"{message.preset} failed", severity="error", timeout=10)

    def on_bench_sweep_failed(self, message: BenchSweepFailed) -> None:
        self._step_started_at = None
        for widget in self.query("#bench-settings Input, #bench-settings Button"):
            widget.disabled = False  # fix the form and Start again
        # the bar stops: nothing runs any more (an indeterminate bar would say something still does)
        self.query_one("#bench-progress", ProgressBar).update(total=100, progress=0)
        self._status(f"bench could not run: {message.message}")
        self.notify(message.message, title="bench", severity="error", timeout=10)

    def on_bench_sweep_finished(self, message: BenchSweepFinished) -> None:
        self._step_started_at = None
        self.results = message.results
        self.rows = list(message.results.rows)  # now with Δppl and speedup against the reference
        self._show_rows(self.rows)
        progress = self.query_one("#bench-progress", ProgressBar)
        progress.update(total=progress.total or 1, progress=progress.total or 1)
        if message.cancelled or not self.rows:
            self._status("stopped" if message.cancelled else "no preset could be measured")
            return
        self.saved_files = self._save(message.results)
        self.query_one("#bench-export", Button).disabled = False
        failed = f"; {len(message.failures)} failed" if message.failures else ""
        self._status(f"done: {len(self.rows)} presets{failed}; saved {self.saved_files[0].with_suffix('.*')}")

    def _save(self, results: BenchResults) -> tuple[Path, ...]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stem = self.out_dir / time.strftime("bench-%Y%m%d-%H%M%S")
        return tuple(write_results(results, fmt, stem.with_suffix(f".{fmt}")) for fmt in FORMATS)

    def _show_rows(self, rows: list[BenchRow]) -> None:
        table = self.query_one("#bench-table", DataTable)
        table.clear()
        footnotes: dict[str, list[str]] = {}
        for row in rows:
            cells = md_cells(row, footnotes)
            table.add_row(*(cells[i] for i in SCREEN_ORDER), key=row.preset)
        self.query_one("#bench-notes", Static).update(footnote_lines(footnotes).rstrip())
        self._draw_plots()

    def _draw_plots(self) -> None:
        """The report's charts of the rows so far; the budget (and so the verdicts) once the sweep has its machine."""
        budget = self.results.machine.device_budget_mb * MIB if self.results is not None else 0
        try:
            rows: list[ReportRow] = [report_row(row, "", budget, row.preset) for row in self.rows]
        except WorkbenchError as error:  # a figure no chart can show: said, not drawn
            self._status(f"charts: {error}")
            rows = []
        self.query_one(BenchCharts).show(rows, budget_known=self.results is not None)

    @on(Button.Pressed, "#bench-export")
    def export_report(self) -> None:
        """The sweep as the stakeholder report (HTML beside the saved results), written off the event loop."""
        if self.results is None or not self.saved_files:
            return
        self.query_one("#bench-export", Button).disabled = True
        self._status("writing the report…")
        self.run_worker(partial(export_in_thread, self.results, self.saved_files[0].with_suffix(".html"),
                                self.post_message), thread=True, group="bench-report")

    def on_bench_report_exported(self, message: BenchReportExported) -> None:
        self.query_one("#bench-export", Button).disabled = False
        self._status(f"report written: {message.path}")
        self.notify(message.path, title="report written")

    def on_bench_report_failed(self, message: BenchReportFailed) -> None:
        self.query_one("#bench-export", Button).disabled = False
        self._status(f"the report could not be written: {message.message}")
        self.notify(message.message, title="report", severity="error", timeout=10)

    def _status(self, text: str) -> None:
        self.query_one("#bench-status", Static).update(text)

    def action_task_bench(self) -> None:
        self.app.push_screen(TaskBenchScreen(self.model_path, self.device, self.presets))

    def action_leave(self) -> None:
        self.cancel_event.set()  # the worker stops between steps and closes its engine
        self.dismiss(self.results)


def export_in_thread(results: BenchResults, out: Path, post: Callable[[Message], object]) -> None:
    """Worker body: the report of this sweep written to `out`; only posts."""
    from workbench.core.bench.report_export import export_report  # deferred: matplotlib, on the first export

    try:
        post(BenchReportExported(str(export_report([(out.with_suffix(".json").name, results)], out))))
    except WorkbenchError as error:
        post(BenchReportFailed(str(error)))


def sweep_in_thread(model_path: Path, presets: tuple[Preset | str, ...], device: DeviceProfile | str, n_prompt: int,
                    n_gen: int, repetitions: int, eval_text: str | None, ppl_ctx: int, cancel: threading.Event,
                    post: Callable[[Message], object]) -> None:
    """Worker body: the whole sweep, off the event loop (presets and device resolved here: files); only posts."""
    try:
        config = SweepConfig(model_path=model_path, presets=tuple(preset_from(p) for p in presets),
                             device=device_from(device), n_prompt=n_prompt, n_gen=n_gen, repetitions=repetitions,
                             eval_text=eval_text, ppl_ctx=ppl_ctx)
        for event in run_sweep(config, cancel):
            if isinstance(event, SweepStepStarted):
                post(BenchStepStarted(event.preset, event.step, event.done_steps, event.total_steps, event.fraction))
            elif isinstance(event, PresetMeasured):
                post(BenchRowMeasured(event.row))
            elif isinstance(event, PresetFailed):
                post(BenchPresetFailed(event.preset, event.message))
            elif isinstance(event, SweepFinished):
                failures = tuple(f"{f.preset}: {f.message}" for f in event.failures)
                post(BenchSweepFinished(event.results, failures, event.cancelled))
    except WorkbenchError as error:
        post(BenchSweepFailed(str(error)))
