"""The verdict line under the selectors: the ledger's verdict for the choice, or the load's progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import ProgressBar, Static

from workbench.core.ledger.types import DOES_NOT_FIT, TIGHT, Ledger
from workbench.core.ledger.verdict_text import verdict_sentence
from workbench.core.units import mib
from workbench.ui.device_problems import DeviceProblem
from workbench.ui.loaded_choice import Choice

if TYPE_CHECKING:
    from workbench.core.config.presets import Problem

VERDICT_MARKS = {DOES_NOT_FIT: "✘", TIGHT: "⚠"}  # else ✔
VERDICT_CLASSES = {DOES_NOT_FIT: "-nofit", TIGHT: "-tight"}  # else -fits


def verdict_mark(verdict: str) -> str:
    return VERDICT_MARKS.get(verdict, "✔")


def verdict_class(verdict: str) -> str:
    return VERDICT_CLASSES.get(verdict, "-fits")


@dataclass(frozen=True)
class Prediction:
    """The ledger predicted for `choice` and the preset's problems, or why there is none."""

    choice: Choice | None
    ledger: Ledger | None
    problems: tuple[Problem, ...] = ()
    failure: str = ""
    note: str = ""  # said after the verdict (the presets form: whether it is saved)


@dataclass(frozen=True)
class LoadProgress:
    """A load under way: the engine's stage and its fraction (below 0: unknown)."""

    stage: str = ""
    fraction: float = -1.0


Describe = Callable[[Prediction, Choice | None], tuple[str, str]]  # (text, CSS class) of a prediction


class VerdictLine(Horizontal):
    """The screen sets `prediction`, `progress` (None when no load runs) and `loaded` (what the engine runs).

    `describe` words a prediction (the main screen's sentence by default); `verdict_id` names the text
    for the screen's CSS; a line without `load_progress` has no progress bar."""

    prediction: reactive[Prediction | None] = reactive(None, init=False)
    progress: reactive[LoadProgress | None] = reactive(None, init=False)
    loaded: reactive[Choice | None] = reactive(None, init=False)

    def __init__(self, *, describe: Describe | None = None, verdict_id: str = "verdict", load_progress: bool = True,
                 placeholder: str = "Predicting the memory ledger…", **kwargs) -> None:
        super().__init__(**kwargs)
        self._describe = describe or describe_for_main
        self._verdict_id = verdict_id
        self._load_progress = load_progress
        self._placeholder = placeholder

    def compose(self) -> ComposeResult:
        yield Static(self._placeholder, id=self._verdict_id, markup=False)
        if self._load_progress:
            yield ProgressBar(id="load-progress", show_eta=False)

    def on_mount(self) -> None:
        self.watch_progress()

    def watch_prediction(self) -> None:
        self._show_text()

    def watch_loaded(self) -> None:
        self._show_text()

    def watch_progress(self) -> None:
        if not self._load_progress:
            return
        bar = self.query_one("#load-progress", ProgressBar)
        progress = self.progress
        bar.display = progress is not None
        if progress is None:
            # a hidden indeterminate bar still animates (and repaints) at 15 fps: give it an end
            bar.update(total=100, progress=100)
        elif progress.fraction < 0:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=round(progress.fraction * 100))
        self._show_text()

    def _show_text(self) -> None:
        verdict = self.query_one(f"#{self._verdict_id}", Static)
        if self.progress is not None and self.progress.stage:
            verdict.update(f"{self.progress.stage}…")
            return
        if self.prediction is None:
            return  # the first prediction is still running: the line says so
        text, css_class = self._describe(self.prediction, self.loaded)
        verdict.update(text)
        verdict.set_classes(css_class)


def describe_for_main(prediction: Prediction, loaded: Choice | None) -> tuple[str, str]:
    """The main screen's line: the verdict in a sentence, or the selection's own when another model is loaded."""
    ledger = prediction.ledger
    if ledger is None:
        return f"✘ cannot predict the ledger: {prediction.failure}", "-nofit"
    mark = verdict_mark(ledger.verdict)
    if loaded is not None and prediction.choice != loaded:
        # the panels keep describing what the engine runs; this line is the selection's own prediction
        text = (f"{mark} selected {ledger.preset} on {ledger.device}: {ledger.verdict.upper()}, "
                f"{mib(ledger.total_bytes)} of {mib(ledger.budget_bytes)}; not loaded — Ctrl+L reloads with it")
    else:
        text = f"{mark} {verdict_sentence(ledger)}"
    errors = [problem for problem in prediction.problems if problem.level == "error"]
    device_warnings = [problem for problem in prediction.problems if isinstance(problem, DeviceProblem)]
    if errors:
        text += f"  Preset problem: {errors[0].message}"
    elif device_warnings:  # the preset runs, but the device runs its offloaded layers slower than its CPU
        text += f"  ⚠ {device_warnings[0].message}. {device_warnings[0].fix}"
    return text, verdict_class(ledger.verdict)


def describe_in_figures(prediction: Prediction, loaded: Choice | None = None) -> tuple[str, str]:
    """A short line (the presets form's): the verdict in the ledger's own figures, then the note."""
    ledger = prediction.ledger
    if ledger is None:
        return f"✘ {prediction.failure}", "-nofit"
    note = f"  ·  {prediction.note}" if prediction.note else ""
    return (f"{verdict_mark(ledger.verdict)} {ledger.verdict.upper()}: {mib(ledger.total_bytes)} of "
            f"{mib(ledger.budget_bytes)} on {ledger.device}{note}", verdict_class(ledger.verdict))
