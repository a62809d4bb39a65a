"""Messages posted by the app's thread workers (past tense: something has happened)."""

from __future__ import annotations

from textual.message import Message

from workbench.core.engine.events import ContextShifted, EngineFailed, Loaded, TurnFinished
from workbench.core.ledger.types import Ledger
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.telemetry.sample import TelemetrySample


class LedgerPredicted(Message):
    """The ledger for the selected model, preset and device (before anything loads)."""

    def __init__(self, model: ModelInfo, preset: Preset, device: DeviceProfile, ledger: Ledger,
                 problems: tuple = (), choice=None) -> None:
        super().__init__()
        self.model, self.preset, self.device, self.ledger, self.problems = model, preset, device, ledger, problems
        self.choice = choice  # the selectors' loaded_choice.Choice this was predicted for


class SplitPredicted(Message):
    """The per-device ledger (devices_split.SplitLedger), or None when every layer stays on the CPU."""

    def __init__(self, split: object | None) -> None:
        super().__init__()
        self.split = split


class PredictionFailed(Message):
    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class LoadProgressReported(Message):
    def __init__(self, stage: str, fraction: float) -> None:
        super().__init__()
        self.stage, self.fraction = stage, fraction

    def can_replace(self, message: Message) -> bool:
        # only the newest progress matters when drawing falls behind
        return isinstance(message, LoadProgressReported)


class ModelLoaded(Message):
    def __init__(self, loaded: Loaded) -> None:
        super().__init__()
        self.loaded = loaded


class LoadFailed(Message):
    def __init__(self, failure: EngineFailed) -> None:
        super().__init__()
        self.failure = failure


class TokensArrived(Message):
    """A batch of token chunks (the chat worker posts at most ~20 per second)."""

    def __init__(self, text: str, n_tokens: int, first_timestamp: float, last_timestamp: float) -> None:
        super().__init__()
        self.text, self.n_tokens = text, n_tokens
        self.first_timestamp, self.last_timestamp = first_timestamp, last_timestamp


class PrefillReported(Message):
    """The engine is reading the prompt: `evaluated` of `total` new tokens so far."""

    def __init__(self, evaluated: int, total: int) -> None:
        super().__init__()
        self.evaluated, self.total = evaluated, total

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PrefillReported)


class ContextShiftNoticed(Message):
    def __init__(self, shift: ContextShifted) -> None:
        super().__init__()
        self.shift = shift


class TurnEnded(Message):
    def __init__(self, finished: TurnFinished) -> None:
        super().__init__()
        self.finished = finished


class EngineDied(Message):
    """The engine failed during a turn or a request; `failure.kind` says how."""

    def __init__(self, failure: EngineFailed) -> None:
        super().__init__()
        self.failure = failure


class ModelUnloaded(Message):
    pass


class TelemetrySampled(Message):
    def __init__(self, sample: TelemetrySample) -> None:
        super().__init__()
        self.sample = sample

    def can_replace(self, message: Message) -> bool:
        # a newer sample supersedes an undrawn older one (only when the UI thread falls behind)
        return isinstance(message, TelemetrySampled)


class TelemetryFailed(Message):
    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class ModelsFound(Message):
    """The model screen's scan: (label, path, origin) for bundled, cached and local files."""

    def __init__(self, entries: tuple[tuple[str, str, str], ...], problems: tuple[str, ...]) -> None:
        super().__init__()
        self.entries, self.problems = entries, problems


class ModelInspected(Message):
    def __init__(self, path: str, model: ModelInfo | None, error: str = "") -> None:
        super().__init__()
        self.path, self.model, self.error = path, model, error


class VoteArrived(Message):
    """The N samples of a chat turn in vote mode (workbench/ui/chat_vote.py), decoded together."""

    def __init__(self, finished, n: int) -> None:
        super().__init__()
        self.finished, self.n = finished, n
