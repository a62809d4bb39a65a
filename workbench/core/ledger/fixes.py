"""When a preset does not fit: the cheapest preset changes that make it fit, each with the MiB saved and its cost."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from workbench.core.config.preset import Preset
from workbench.core.gguf.ggml_types import cache_type
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.types import LedgerFix

# A candidate change: (what it changes, the Preset fields to replace, its known cost, cost rank).
# Rank orders equally effective fixes: what costs nothing first, quality last.
Candidate = tuple[str, tuple[tuple[str, object], ...], str, int]
# A provider proposes candidates for a model and preset. The fixes that move layers to the profile's
# GPU or to a second node are priced per device, in ledger/placement_fixes.py (with_placement_fixes).
FixProvider = Callable[[ModelInfo, Preset], Iterable[Candidate]]

_SMALL_UBATCHES = (256, 128, 64)
# Quality costs of weight types: llama.cpp's quantize table on an 8B model (tools/quantize/README.md),
# perplexity increase over F16.
_WEIGHT_COSTS = (("Q8_0", "+0.003 ppl on an 8B model (llama.cpp's table)"),
                 ("Q6_K", "+0.02 ppl on an 8B model (llama.cpp's table)"),
                 ("Q5_K_M", "+0.05 ppl on an 8B model (llama.cpp's table)"),
                 ("Q4_K_M", "+0.18 ppl on an 8B model (llama.cpp's table)"),
                 ("Q3_K_M", "+0.66 ppl on an 8B model (llama.cpp's table)"))


def _kv_candidates(model: ModelInfo, preset: Preset) -> Iterable[Candidate]:
    for kind, cost, rank in (("q8_0", "near-lossless cache; needs flash attention", 1),
                             ("q4_0", "a measurable quality loss on long contexts; needs flash attention", 4)):
        block = cache_type(kind).block_size
        if model.head_dim_k % block or model.head_dim_v % block:
            continue  # llama.cpp refuses a quantized cache whose rows are not whole blocks
        current = cache_type(preset.cache_type_k).bytes_per_element + cache_type(preset.cache_type_v).bytes_per_element
        if 2 * cache_type(kind).bytes_per_element < current:
            yield (f"KV cache {kind} + flash attention", (("cache_type_k", kind), ("cache_type_v", kind),
                                                          ("flash_attn", True)), cost, rank)


def _ubatch_candidates(model: ModelInfo, preset: Preset) -> Iterable[Candidate]:
    for ubatch in _SMALL_UBATCHES:
        if ubatch < preset.ubatch_size:
            yield (f"ubatch_size {preset.ubatch_size} -> {ubatch}", (("ubatch_size", ubatch),),
                   "slower prompt processing (fewer tokens per graph run)", 0)


def _swa_candidates(model: ModelInfo, preset: Preset) -> Iterable[Candidate]:
    if preset.swa_full:
        yield ("swa_full off", (("swa_full", False),),
               "a cached prompt can only be reused within the sliding window", 0)


def _weight_candidates(model: ModelInfo, preset: Preset) -> Iterable[Candidate]:
    for weights, cost in _WEIGHT_COSTS:
        if weights != preset.weights:
            yield (f"weights {preset.weights} -> {weights}", (("weights", weights),),
                   f"re-quantization, quality {cost}", 5)


FIX_PROVIDERS: list[FixProvider] = [_ubatch_candidates, _swa_candidates, _kv_candidates, _weight_candidates]


def propose_fixes(model: ModelInfo, preset: Preset, n_ctx: int, total_bytes: int, budget_bytes: int,
                  total_of: Callable[[Preset], int], max_ctx_of: Callable[[Preset], int]) -> tuple[LedgerFix, ...]:
    """Changes that lower the total, those that make it fit first, cheapest first, then by MiB saved.

    `total_of(preset)` is the ledger total for a changed preset; `max_ctx_of(preset)` the
    largest context that fits the budget with it (0 = none).
    """
    fixes: list[tuple[int, LedgerFix]] = []
    largest = max_ctx_of(preset)
    if 0 < largest < n_ctx:
        smaller = dataclasses.replace(preset, ctx_size=largest)
        fixes.append((2, LedgerFix(
            change=f"ctx_size {n_ctx} -> {largest}", preset_changes=(("ctx_size", largest),),
            saved_bytes=total_bytes - total_of(smaller), fits=True,
            cost=f"the conversation holds {largest:,} tokens instead of {n_ctx:,}")))
    for provider in FIX_PROVIDERS:
        for change, changes, cost, rank in provider(model, preset):
            try:
                changed = dataclasses.replace(preset, **dict(changes))
                saved = total_bytes - total_of(changed)
            except Exception:  # noqa: BLE001 - a provider's candidate the ledger cannot price is left out
                continue
            if saved <= 0:
                continue
            fits = total_bytes - saved <= budget_bytes
            fixes.append((rank, LedgerFix(change=change, preset_changes=changes, saved_bytes=saved, cost=cost,
                                          fits=fits)))
    # A fix that fits: the smallest change that does (the largest ubatch, the best weight type);
    # one that does not: the one that saves most.
    fixes.sort(key=lambda item: (not item[1].fits, item[0], item[1].saved_bytes if item[1].fits else -item[1].saved_bytes))
    return _one_per_kind(fix for _, fix in fixes)


def _one_per_kind(fixes: Iterable[LedgerFix]) -> tuple[LedgerFix, ...]:
    """The first (cheapest) fix of each changed key set: one ubatch size, one weight type, ..."""
    seen: set[tuple[str, ...]] = set()
    kept = []
    for fix in fixes:
        keys = tuple(sorted(key for key, _ in fix.preset_changes))
        if keys in seen:
            continue
        seen.add(keys)
        kept.append(fix)
    return tuple(kept)


def apply_fix(preset: Preset, fix: LedgerFix) -> Preset:
    """`preset` with the fix's changes; a quantized V cache comes with flash attention already."""
    return dataclasses.replace(preset, **dict(fix.preset_changes))
