"""The fit search's values: what it may choose from, what it was asked, and what it chose."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.config.preset import Preset
from workbench.core.fit.quality import MeasuredQuality
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.split_types import SplitDevice, SplitLedger
from workbench.core.ledger.types import Ledger

DEFAULT_CTX_MIN = 4096  # llama.cpp's own floor for its --fit (common.h fit_params_min_ctx, -fitc)


@dataclass(frozen=True)
class WeightOption:
    """One way to get the weights: a file as it is, or a re-quantization of it."""

    model: ModelInfo  # the file's header (a re-quantization: the source's)
    weights: str  # the preset's `weights`: "keep" or the type llama-quantize makes
    weight_type: str  # the type the weights end up as
    source: str  # "the file as is", "re-quantized from Q8_0", "hub file NAME"
    filename: str = ""  # a hub repository's file


@dataclass(frozen=True)
class FitRequest:
    """What the choice must meet, and the preset it starts from (its keys outside the search are kept)."""

    base: Preset
    ctx_min: int = DEFAULT_CTX_MIN
    min_tps: float | None = None  # decode tokens/s at empty context
    quality: str | None = None  # the floor: "q4", "q5", "q8", ...
    measured: tuple[MeasuredQuality, ...] = ()
    devices: tuple[SplitDevice, ...] = ()  # RPC nodes, then the host's own GPU (llama.cpp's device order)
    name: str = "fit"  # the chosen preset's name


@dataclass(frozen=True)
class FitCandidate:
    preset: Preset  # ctx_size is the largest that fits
    option: WeightOption
    quality_loss: float  # perplexity increase: weights plus the KV cache's rank
    quality_source: str
    decode_tps: float | None  # at empty context; None when neither the speed model nor the bound has it
    speed_source: str
    ledger: Ledger  # the host ledger of the preset (its largest contexts only once chosen)
    split: SplitLedger | None = None  # with RPC nodes or a GPU of its own: the per-device ledger

    @property
    def ctx(self) -> int:
        return self.preset.ctx_size


@dataclass(frozen=True)
class FitChange:
    key: str
    old: object
    new: object
    why: str


@dataclass(frozen=True)
class FitAlternative:
    candidate: FitCandidate
    trades: str  # what it gains and gives up against the choice


@dataclass(frozen=True)
class FitResult:
    fits: bool
    chosen: FitCandidate | None
    changes: tuple[FitChange, ...]
    alternatives: tuple[FitAlternative, ...]
    reason: str  # why this one; when nothing fits, why not and the smallest change outside the search
    considered: int  # candidates priced
