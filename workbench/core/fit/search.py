"""The fit search: every preset the options allow, priced by the ledger, the one that loses least chosen.

Candidates, in llama.cpp's vocabulary: each weight option (a hub repository's files, or a local file as
it is and re-quantized), the K/V cache types with flash attention, ubatch, swa_full and, with devices of
their own (RPC nodes, a GPU with its own memory), gpu_layers. Each gets the largest context that fits
(ledger.predict.max_ctx_that_fits, checked with predict_ledger); the ones that meet --ctx-min and
--min-tps are ordered by quality lost, then context (by doubling), then how few keys change, then speed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import preset_problems
from workbench.core.fit.explain import alternatives, changes_from, nothing_fits
from workbench.core.fit.quality import cache_loss, check_floor, type_bits, weights_loss
from workbench.core.fit.split_fit import fit_split
from workbench.core.fit.types import FitCandidate, FitRequest, FitResult, WeightOption
from workbench.core.gguf.ggml_types import cache_type
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.ctx_search import largest_fitting_ctx
from workbench.core.ledger.kv_layers import CTX_PAD, sliding_window
from workbench.core.ledger.predict import (
    max_ctx_that_fits,
    predict_ledger,
    predicted_total_bytes,
    predicted_weights_bytes,
)
from workbench.core.ledger.speed import SpeedCorrection
from workbench.core.units import MIB

SMALLER_UBATCHES = (256, 128)
QUANTIZED_CACHES = ("q8_0", "q4_0")
CHANGE_KEYS = ("cache_type_k", "flash_attn", "ubatch_size", "swa_full")


def kv_choices(option: WeightOption, base: Preset, floor: int) -> list[tuple[str, bool]]:
    """(cache type for K and V, flash attention): f16 as the base has it and with flash attention, then
    the quantized caches the model's head sizes allow (a quantized V cache needs flash attention)."""
    model = option.model
    out = [("f16", base.flash_attn)] + ([("f16", True)] if not base.flash_attn else [])
    for kind in QUANTIZED_CACHES:
        block = cache_type(kind).block_size
        if type_bits(kind) >= floor and not (model.head_dim_k % block or model.head_dim_v % block):
            out.append((kind, True))
    return out


def presets_of(option: WeightOption, base: Preset, floor: int) -> list[Preset]:
    """Every preset of the search for one weight option (ctx_size still the base's)."""
    ubatches = [base.ubatch_size] + [u for u in SMALLER_UBATCHES if u < base.ubatch_size]
    swa = {base.swa_full, False} if sliding_window(option.model) is not None else {base.swa_full}
    out = []
    for kind, flash in kv_choices(option, base, floor):
        for ubatch in ubatches:
            for swa_full in sorted(swa):
                out.append(dataclasses.replace(base, weights=option.weights, cache_type_k=kind, cache_type_v=kind,
                                               flash_attn=flash, ubatch_size=ubatch, swa_full=swa_full))
    return [p for p in out if not any(problem.level == "error" for problem in preset_problems(p, option.model))]


def largest_ctx(model: ModelInfo, preset: Preset, device: DeviceProfile) -> int:
    """The largest context (a multiple of 256) whose ledger total is within the budget, 0 if none.

    max_ctx_that_fits sizes the four main lines; the ledger's total holds more (the CPU repack), so its
    answer is an upper bound searched down from with that total (predicted_total_bytes)."""
    budget = device.budget_mb * MIB

    def fits(ctx: int) -> bool:
        return predicted_total_bytes(model, preset, device, ctx_size=ctx) <= budget

    weights_bytes = predicted_weights_bytes(model, preset.weights, mapped=preset.mmap)
    high = max_ctx_that_fits(model, preset, weights_bytes, preset.cache_type_k, budget) // CTX_PAD
    if high == 0 or fits(high * CTX_PAD):
        return high * CTX_PAD
    return largest_fitting_ctx(fits, high - 1, near_top=True)


def _host_candidate(option: WeightOption, preset: Preset, device: DeviceProfile, request: FitRequest,
                    correction: SpeedCorrection | None, loss: tuple[float, str]) -> FitCandidate | None:
    ctx = largest_ctx(option.model, preset, device)
    if ctx < max(request.ctx_min, CTX_PAD):
        return None
    sized = dataclasses.replace(preset, ctx_size=ctx)
    ledger = predict_ledger(option.model, sized, device, speed_correction=correction, largest_contexts=False)
    tps, source = decode_rate(ledger)
    return FitCandidate(sized, option, loss[0] + cache_loss(preset.cache_type_k), loss[1], tps, source, ledger)


def decode_rate(ledger) -> tuple[float | None, str]:
    """Decode at empty context: the speed model's prediction, else the bandwidth bound, else unavailable."""
    speed = ledger.speed
    if speed is not None and speed.decode_tps_empty:
        return speed.decode_tps_empty, f"speed model ({speed.method})"
    if ledger.decode_tps_bound[0] > 0:
        return ledger.decode_tps_bound[0], "bandwidth bound"
    return None, "unavailable (the profile has no bandwidth or probed rates)"


def score(candidate: FitCandidate, base: Preset) -> tuple:
    """Smaller is better: quality lost, context by doublings (larger first), keys changed, context, speed."""
    changed = sum(getattr(candidate.preset, key) != getattr(base, key) for key in CHANGE_KEYS)
    return (round(candidate.quality_loss, 6), -int(math.log2(candidate.ctx)), changed, -candidate.ctx,
            -(candidate.decode_tps or 0.0))


def eligible(options: Sequence[WeightOption], request: FitRequest) -> list[WeightOption]:
    """The options at or above the quality floor that a published or measured figure ranks."""
    floor = check_floor(request.quality)
    return [o for o in options if type_bits(o.weight_type) >= floor
            and weights_loss(o.weight_type, "f16", request.measured) is not None]


def candidates(options: Sequence[WeightOption], device: DeviceProfile, request: FitRequest,
               correction: SpeedCorrection | None = None) -> tuple[list[FitCandidate], int]:
    """(every candidate that fits with at least ctx_min, how many presets were priced)."""
    floor = check_floor(request.quality)
    found, priced = [], 0
    for option in eligible(options, request):
        loss = weights_loss(option.weight_type, "f16", request.measured)
        assert loss is not None  # eligible() keeps only options with a figure
        for preset in presets_of(option, request.base, floor):
            priced += 1
            if request.devices:
                candidate = fit_split(option, preset, device, request, correction, loss)
            else:
                candidate = _host_candidate(option, preset, device, request, correction, loss)
            if candidate is not None:
                found.append(candidate)
    return found, priced


def fit(options: Sequence[WeightOption], device: DeviceProfile, request: FitRequest,
        correction: SpeedCorrection | None = None) -> FitResult:
    """The best preset for `device` among `options`, why, and the next best with what each trades."""
    found, priced = candidates(options, device, request, correction)
    fast_enough = [c for c in found if request.min_tps is None or (c.decode_tps or 0.0) >= request.min_tps]
    if not fast_enough:
        return FitResult(False, None, (), (), nothing_fits(options, eligible(options, request), device, request, found), priced)
    ranked = sorted(fast_enough, key=lambda c: score(c, request.base))
    chosen = ranked[0]
    ledger = predict_ledger(chosen.option.model, chosen.preset, device, speed_correction=correction)  # whole, shown
    chosen = dataclasses.replace(chosen, preset=dataclasses.replace(chosen.preset, name=request.name,
                                                                    description=_description(chosen), source=""),
                                 ledger=dataclasses.replace(ledger, preset=request.name))
    return FitResult(True, chosen, changes_from(request.base, chosen, ranked, request), alternatives(chosen, ranked),
                     f"the least quality lost of {len(fast_enough)} candidates that fit ({priced} priced)", priced)


def _description(candidate: FitCandidate) -> str:
    return (f"chosen by workbench fit: {candidate.option.weight_type} weights, {candidate.preset.cache_type_k} KV "
            f"cache, ctx {candidate.ctx:,}")
