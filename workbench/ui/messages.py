"""Messages posted by the app's thread workers (past tense: something has happened).

A message a widget posts from the UI thread lives in that widget's class."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.events import (
    ContextShifted,
    EngineFailed,
    Loaded,
    TurnFinished,
)
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.types import Ledger
from workbench.core.telemetry.sample import TelemetrySample
from workbench.ui.loaded_choice import Choice

if TYPE_CHECKING:  # the bench's types pull its whole package: names in annotations only
    from workbench.core.bench.report import BenchResults
    from workbench.core.bench.rows import BenchRow
    from workbench.core.config.presets import Problem
    from workbench.core.tasks.results import TaskRow


@dataclass
class LedgerPredicted(Message):
    """The ledger for the chosen model, preset and device (before anything loads)."""

    model: ModelInfo
    preset: Preset
    device: DeviceProfile
    ledger: Ledger
    problems: tuple[Problem, ...]
    choice: Choice  # the choice it was predicted for
    request: int  # which prediction: a later request's answer replaces it (predict_choice)


@dataclass
class SplitPredicted(Message):
    """The per-device ledger (a SplitLedger), or None when every layer stays on the CPU."""

    split: Any
    request: int


@dataclass
class PredictionFailed(Message):
    reason: str
    request: int


@dataclass
class LoadProgressReported(Message):
    stage: str
    fraction: float

    def can_replace(self, message: Message) -> bool:
        # only the newest progress matters when drawing falls behind
        return isinstance(message, LoadProgressReported)


@dataclass
class ModelLoaded(Message):
    loaded: Loaded


@dataclass
class LoadFailed(Message):
    failure: EngineFailed


@dataclass
class TokensArrived(Message):
    """A batch of token chunks (the chat worker posts at most ~10 a second)."""

    text: str
    n_tokens: int
    first_timestamp: float
    last_timestamp: float


@dataclass
class PrefillReported(Message):
    """The engine is reading the prompt: `evaluated` of `total` new tokens so far."""

    evaluated: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PrefillReported)


@dataclass
class ContextShiftNoticed(Message):
    shift: ContextShifted


@dataclass
class AnswerEnded(Message):
    """The engine finished the turn (stopped, hit its limit, or was cancelled)."""

    finished: TurnFinished


@dataclass
class VoteArrived(Message):
    """The N samples of a chat turn in vote mode (workbench/ui/chat_vote.py), decoded together."""

    finished: Any  # SamplesFinished
    n: int
    n_ctx: int  # the loaded context's size, for the turn's stats


@dataclass
class EngineDied(Message):
    """The engine failed during a turn or a request; `failure.kind` says how."""

    failure: EngineFailed


@dataclass
class ModelUnloaded(Message):
    pass


@dataclass
class TelemetrySampled(Message):
    sample: TelemetrySample

    def can_replace(self, message: Message) -> bool:
        # a newer sample supersedes an undrawn older one (only when the UI thread falls behind)
        return isinstance(message, TelemetrySampled)


@dataclass
class TelemetryFailed(Message):
    reason: str


@dataclass
class ModelsFound(Message):
    """The model screen's scan: (label, path, origin) for bundled, cached and local files."""

    entries: tuple[tuple[str, str, str], ...]
    problems: tuple[str, ...]
    request: int  # the screen's "scan" request: an earlier scan's list is dropped


@dataclass
class ModelInspected(Message):
    path: str
    model: ModelInfo | None
    error: str = ""


@dataclass
class DownloadAdvanced(Message):
    """A hub download's newest progress (workbench/ui/download_jobs.py)."""

    event: Any  # DownloadProgressed

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DownloadAdvanced)  # only the newest figure matters


@dataclass
class DownloadEnded(Message):
    """A hub download finished, failed or was cancelled; the job holds the outcome."""

    job: Any  # download_jobs.DownloadJob


@dataclass
class PresetChecked(Message):
    """The presets form's preset checked against the model and predicted on the device (or why not)."""

    preset: Preset
    problems: tuple[Problem, ...] = ()
    ledger: Ledger | None = None
    failure: str = ""


@dataclass
class BenchStepStarted(Message):
    """The bench sweep began a step (load, warm-up, a run, perplexity) of a preset."""

    preset: str
    step: str
    done_steps: int
    total_steps: int
    fraction: float = 0.0  # of this step, where it reports progress (perplexity)


@dataclass
class BenchRowMeasured(Message):
    row: BenchRow


@dataclass
class BenchPresetFailed(Message):
    preset: str
    message: str


@dataclass
class BenchSweepFinished(Message):
    results: BenchResults
    failures: tuple[str, ...]
    cancelled: bool


@dataclass
class BenchReportExported(Message):
    """The bench screen's report was written (HTML, self-contained)."""

    path: str


@dataclass
class BenchReportFailed(Message):
    message: str


@dataclass
class BenchSweepFailed(Message):
    """The sweep could not run at all (unknown preset, unreadable model, ...): one line."""

    message: str


@dataclass
class TaskStepped(Message):
    """The task sweep's progress: `done` of `total` questions, `label` says which preset and N."""

    label: str
    done: int
    total: int


@dataclass
class TaskRowMeasured(Message):
    row: TaskRow


@dataclass
class TaskBenchEnded(Message):
    """The task sweep finished (rows with the Pareto marks) or could not run (`error`)."""

    rows: tuple[TaskRow, ...]
    failures: tuple[str, ...] = ()
    error: str = ""


@dataclass
class ReposFound(Message):
    """Hub repositories to list (a search's hits, or the curated ones), and the status line to show."""

    hits: tuple
    title: str
    request: int  # HubBrowser's request of the "search" group: an earlier one's answer is dropped


@dataclass
class FilesListed(Message):
    repo: str
    listing: Any  # RepoFiles
    request: int


@dataclass
class FitPreviewed(Message):
    """Whether a hub file fits, read from its header: `key` is (repo, file name)."""

    key: tuple[str, str]
    preview: Any
    request: int


@dataclass
class HubFailed(Message):
    """A search, listing or preview failed; `stage` says which, `text` is the one-line error."""

    stage: str
    text: str
    unreachable: bool
    request: int  # of the stage's group ("search", "files", "preview")


@dataclass
class FitSearched(Message):
    """The fit search for the chosen model on the chosen device (workbench fit): the result, chosen or not."""

    result: Any  # workbench.core.fit.types.FitResult
    choice: Choice  # the model, preset and device it searched from


@dataclass
class FitFailed(Message):
    """The fit search could not run (the model or a profile could not be read)."""

    reason: str


@dataclass
class BestFitFound(Message):
    """The file of a listed repository the fit search would choose for the device (None: none fits)."""

    repo: str
    filename: str | None
    summary: str  # the choice in a few words, or why nothing fits
    request: int
