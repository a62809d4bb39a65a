"""The memory ledger: predicted weights, KV cache, compute buffer and overhead against a device budget."""

from __future__ import annotations

import dataclasses
from collections import Counter
from fractions import Fraction
from math import ceil

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.errors import WorkbenchError
from workbench.core.gguf.checks import MAX_LAYERS, check_ledger_model
from workbench.core.gguf.ggml_types import CACHE_TYPES, QUANT_TYPES, cache_type
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.cache_sharing import owning_layer_count
from workbench.core.ledger.compute import predicted_compute_bytes, predicted_prompt_compute_bytes
from workbench.core.ledger.cpu_repack import preset_repack
from workbench.core.ledger.experts import expert_counts
from workbench.core.ledger.fixes import propose_fixes
from workbench.core.ledger.indexer_cache import indexer_cache
from workbench.core.ledger.kv_layers import (
    CTX_PAD,
    attention_kv_heads,
    predicted_kv_layers,
    preset_n_ubatch,
    sliding_window,
)
from workbench.core.ledger.llama_build import VERIFIED_LLAMA_CPP, unverified_reason
from workbench.core.ledger.mla import latent_cache
from workbench.core.ledger.recurrent import predicted_rs_bytes, recurrent_state
from workbench.core.ledger.sequences import preset_kv_unified, preset_n_seq
from workbench.core.ledger.speed import SpeedCorrection, predict_speed
from workbench.core.ledger.types import DOES_NOT_FIT, FITS, TIGHT, KVSplit, Ledger, ResidentMemory
from workbench.core.ledger.verdict_text import verdict_reason
from workbench.core.ledger.weights import mtp_weights_bytes, requantized_weights_bytes
from workbench.core.units import MIB

TIGHT_HEADROOM = 0.10  # under 10% of the budget left is "tight"
MAX_CTX_TYPES = ("f16", "q8_0", "q4_0")  # the cache types the ledger offers a max context for

# What the engine process costs beyond llama.cpp's weight, KV and compute buffers, measured
# with benchmarks/ledger_accuracy.py (x86-64, CPython 3.11, llama-cpp-python 0.3.36) as the
# engine's RSS right after load minus the weights and the KV cache:
# - the interpreter with the workbench engine, llama_cpp, numpy and libllama/libggml
#   loaded, plus llama.cpp's fixed host structures (graph metadata, the output buffer): 52 MiB;
# - the vocabulary (token texts, the text-to-id map, the token-to-piece cache): ~160 bytes
#   per token, and ~190 bytes per BPE merge rule (the merge-rank map). Fitted on the tiny
#   models of every family (32,768 tokens, no merges), the 262,144-token Gemma 3 vocabulary
#   and the bundled SmolLM2 (49,152 tokens, 48,900 merges): each within 3 MiB.
ENGINE_PROCESS_BYTES = 52 * MIB
HOST_BYTES_PER_VOCAB_TOKEN = 160
HOST_BYTES_PER_MERGE = 190


def predicted_overhead_bytes(model: ModelInfo) -> int:
    """The engine process beyond its buffers: interpreter and libraries plus llama.cpp's host structures."""
    merges = model.metadata.get("tokenizer.ggml.merges")
    n_merges = len(merges) if merges is not None and hasattr(merges, "__len__") and not isinstance(merges, str) else 0
    return ENGINE_PROCESS_BYTES + HOST_BYTES_PER_VOCAB_TOKEN * model.n_vocab + HOST_BYTES_PER_MERGE * n_merges


def llama_n_ctx(model: ModelInfo, ctx_size: int) -> int:
    """The context llama.cpp will really allocate: 0 means the trained length; padded to 256."""
    ctx = ctx_size if ctx_size > 0 else model.n_ctx_train
    return -(-ctx // CTX_PAD) * CTX_PAD if ctx > 0 else 0


def _kv_head_groups(model: ModelInfo) -> Counter[int]:
    """KV heads -> how many layers have that many: as big as the per-layer array, never as n_layer."""
    if model.n_layer > MAX_LAYERS:  # as big as the per-layer array, never as a file's unchecked count
        per_layer = model.n_head_kv_per_layer[: model.n_layer]
        groups = Counter(per_layer)
        groups[model.n_head_kv] += model.n_layer - len(per_layer)
        return groups
    # recurrent layers keep no KV cache; layers past the cache-owning ones reuse one (cache_sharing)
    return Counter(attention_kv_heads(model)[: owning_layer_count(model)])


def kv_bytes_per_token(model: ModelInfo, type_k: str, type_v: str) -> int:
    """KV bytes one token adds: sum over layers of n_head_kv x (head_dim_k x bpe(K) + head_dim_v x bpe(V)),
    plus the indexer's key per layer that keeps one.

    Rounded up to whole bytes; quantized rows are whole blocks so this is exact for
    models whose K/V rows are a multiple of 32 values (every model llama.cpp accepts).
    """
    bpe_k, bpe_v = cache_type(type_k).bytes_per_element, cache_type(type_v).bytes_per_element
    if latent_cache(model) is not None:
        bpe_v = 0  # MLA keeps no V (ledger.mla)
    total = Fraction(0)
    for heads, n_layers in _kv_head_groups(model).items():
        total += n_layers * heads * (model.head_dim_k * bpe_k + model.head_dim_v * bpe_v)
    indexer = indexer_cache(model)
    if indexer is not None:  # DSA's indexer keys, one head per cell in the K type (ledger.indexer_cache)
        total += len(indexer.layers) * indexer.key_length * bpe_k
    return ceil(total)


def predicted_kv_bytes(model: ModelInfo, n_ctx: int, type_k: str, type_v: str, *, n_ubatch: int = 512,
                       swa_full: bool = False, flash_attn: bool = False, n_seq: int = 1,
                       kv_unified: bool = False) -> int:
    """The KV buffer llama.cpp allocates: one K and one V tensor per layer (kv_layers).

    Global layers hold `n_ctx` cells; sliding-window layers hold their window plus one
    ubatch, padded to 256 (all `n_ctx` with `swa_full`). Each tensor is rounded up to the
    buffer's alignment.
    """
    layers = predicted_kv_layers(model, n_ctx, type_k, type_v, n_ubatch=n_ubatch, swa_full=swa_full,
                                 flash_attn=flash_attn, n_seq=n_seq, kv_unified=kv_unified)
    return sum(layer.n_bytes for layer in layers)


def preset_kv_bytes(model: ModelInfo, preset: Preset, n_ctx: int) -> int:
    """predicted_kv_bytes with the preset's types, ubatch, swa_full, flash attention and sequences."""
    return predicted_kv_bytes(model, n_ctx, preset.cache_type_k, preset.cache_type_v,
                              n_ubatch=preset_n_ubatch(preset, n_ctx), swa_full=preset.swa_full,
                              flash_attn=preset.flash_attn, n_seq=preset_n_seq(preset),
                              kv_unified=preset_kv_unified(preset))


def kv_split(model: ModelInfo, preset: Preset, n_ctx: int) -> KVSplit | None:
    """The window cache and the full-context cache of a model with sliding-window layers."""
    window = sliding_window(model)
    if window is None:
        return None
    layers = predicted_kv_layers(model, n_ctx, preset.cache_type_k, preset.cache_type_v,
                                 n_ubatch=preset_n_ubatch(preset, n_ctx), swa_full=preset.swa_full,
                                 flash_attn=preset.flash_attn, n_seq=preset_n_seq(preset),
                                 kv_unified=preset_kv_unified(preset))
    swa = [layer for layer in layers if layer.is_swa]
    full = [layer for layer in layers if not layer.is_swa]
    return KVSplit(
        n_swa=window.n_swa, swa_layers=len(swa), global_layers=len(full),
        swa_cells=swa[0].cells if swa else 0, global_cells=full[0].cells if full else n_ctx,
        swa_bytes=sum(layer.n_bytes for layer in swa), global_bytes=sum(layer.n_bytes for layer in full),
        swa_full=preset.swa_full, source=window.source,
    )


def predicted_weights_bytes(model: ModelInfo, weights: str, *, mapped: bool = True) -> int:
    """Weight bytes: "keep" = the file's tensors; otherwise what llama-quantize would write. Without mmap
    (`mapped` False) llama.cpp reads only the tensors it loads: not the MTP blocks' (mtp.py)."""
    if weights.lower() == "keep" or (model.file_type is not None and weights.upper() == model.file_type):
        total = model.weights_bytes
    elif weights.upper() not in QUANT_TYPES:
        raise WorkbenchError(f"weights = {weights!r} is not a type llama.cpp's quantizer makes",
                             fix=f"Use 'keep' or one of {', '.join(QUANT_TYPES)}")
    else:
        total = requantized_weights_bytes(model, weights)
    return total if mapped else total - mtp_weights_bytes(model, weights)


def _fits_budget(model: ModelInfo, preset: Preset, weights_bytes: int, n_ctx: int, type_k: str, type_v: str,
                 flash_attn: bool, budget: int) -> bool:
    probe = Preset(name=preset.name, ctx_size=n_ctx, batch_size=preset.batch_size, ubatch_size=preset.ubatch_size,
                   cache_type_k=type_k, cache_type_v=type_v, flash_attn=flash_attn, swa_full=preset.swa_full,
                   parallel=preset.parallel)
    without_compute = (weights_bytes + preset_kv_bytes(model, probe, n_ctx)
                       + predicted_rs_bytes(model, preset_n_seq(probe)) + predicted_overhead_bytes(model))
    if without_compute > budget:  # the compute buffer only adds: no graph to lay out
        return False
    return without_compute + predicted_compute_bytes(model, probe, n_ctx) <= budget


def max_ctx_that_fits(model: ModelInfo, preset: Preset, weights_bytes: int, cache: str, budget: int) -> int:
    """Largest llama.cpp context (a multiple of 256, at most the trained length) that fits `budget`.

    A quantized V cache only loads with flash attention, so quantized types are sized with
    it on; 0 when not even 256 cells fit.
    """
    flash_attn = preset.flash_attn or cache_type(cache).quantized
    ceiling = model.n_ctx_train or 1 << 20
    low, high = 0, ceiling // CTX_PAD  # in units of 256 cells
    while low < high:
        middle = (low + high + 1) // 2
        if _fits_budget(model, preset, weights_bytes, middle * CTX_PAD, cache, cache, flash_attn, budget):
            low = middle
        else:
            high = middle - 1
    return low * CTX_PAD


def predict_ledger(model: ModelInfo, preset: Preset, device: DeviceProfile, *, ctx_size: int | None = None,
                   speed_correction: SpeedCorrection | None = None, largest_contexts: bool = True) -> Ledger:
    """Predict what `model` run with `preset` costs on `device`, line by line, and whether it fits.

    `speed_correction` is the device's bench history (ledger/speed_history.py), applied to the speed model.
    `largest_contexts=False` leaves max_ctx_by_kv_type empty: a search over each cache type's contexts that
    the fit search's candidates, priced by the hundred, do not show.
    """
    check_ledger_model(model)  # per-layer sizes are lists: bounded before anything builds them
    if model.n_layer <= 0 or model.n_embd <= 0:
        raise WorkbenchError(
            f"has no {model.architecture or 'model'}.block_count/embedding_length",
            where=model.source,
            fix="This GGUF is not a text model llama.cpp can run (a vocabulary or projector file?)",
        )
    for key, name in (("cache_type_k", preset.cache_type_k), ("cache_type_v", preset.cache_type_v)):
        if name.lower() not in CACHE_TYPES:
            raise WorkbenchError(f"{key} = {name!r} is not a llama.cpp cache type", where=preset.source or preset.name,
                                 fix=f"Use one of {', '.join(CACHE_TYPES)}")
    n_ctx = llama_n_ctx(model, preset.ctx_size if ctx_size is None else ctx_size)
    weights_bytes = predicted_weights_bytes(model, preset.weights, mapped=preset.mmap)
    kv_bytes = preset_kv_bytes(model, preset, n_ctx)
    rs_bytes = predicted_rs_bytes(model, preset_n_seq(preset))  # the recurrent state, per sequence
    compute_bytes = predicted_compute_bytes(model, preset, n_ctx)
    overhead_bytes = predicted_overhead_bytes(model)
    repack = preset_repack(model, preset, device)
    total = weights_bytes + repack.n_bytes + kv_bytes + rs_bytes + compute_bytes + overhead_bytes
    budget = device.budget_mb * MIB
    headroom = budget - total

    if headroom < 0:
        verdict = DOES_NOT_FIT
    elif headroom < TIGHT_HEADROOM * budget:
        verdict = TIGHT
    else:
        verdict = FITS

    max_ctx = []
    for cache in MAX_CTX_TYPES if largest_contexts else ():
        key = cache if preset.flash_attn or not cache_type(cache).quantized else f"{cache}+flash_attn"
        max_ctx.append((key, max_ctx_that_fits(model, preset, weights_bytes + repack.n_bytes, cache, budget)))
    experts = expert_counts(model, preset.weights)
    read_per_token = experts.active_bytes_per_token if experts else weights_bytes
    sized = dataclasses.replace(preset, ctx_size=n_ctx)
    fixes = () if headroom >= 0 else propose_fixes(
        model, sized, n_ctx, total, budget,
        total_of=lambda changed: predicted_total_bytes(model, changed, device),
        max_ctx_of=lambda changed: max_ctx_that_fits(
            model, changed, predicted_weights_bytes(model, changed.weights, mapped=changed.mmap) + preset_repack(model, changed, device).n_bytes,
            changed.cache_type_k, budget))

    ledger = Ledger(
        model=model.name,
        preset=preset.name,
        device=device.name,
        ctx_size=n_ctx,
        cache_type_k=preset.cache_type_k,
        cache_type_v=preset.cache_type_v,
        ram_total_bytes=device.ram_total_mb * MIB,
        reserves_bytes=tuple((name, mb * MIB) for name, mb in device.reserves_mb),
        budget_bytes=budget,
        weights_bytes=weights_bytes,
        kv_bytes=kv_bytes,
        compute_bytes=compute_bytes,
        overhead_bytes=overhead_bytes,
        total_bytes=total,
        headroom_bytes=headroom,
        verdict=verdict,
        reason="",  # worded below from the finished ledger (verdict_text)
        kv_bytes_per_token=kv_bytes_per_token(model, preset.cache_type_k, preset.cache_type_v),
        max_ctx_by_kv_type=tuple(max_ctx),
        decode_tps_bound=decode_tps_bound(device.mem_bandwidth_gbs, read_per_token, kv_bytes),
        kv_split=kv_split(model, preset, n_ctx),
        resident=predicted_resident(weights_bytes + repack.n_bytes, kv_bytes + rs_bytes, predicted_prompt_compute_bytes(model, preset, n_ctx),
                                    overhead_bytes, preset),
        experts=experts,
        fixes=fixes,
        verified_on=f"llama.cpp {VERIFIED_LLAMA_CPP}",
        unverified=unverified_reason(),
        speed=predict_speed(model, preset, device, n_ctx=n_ctx, correction=speed_correction),
        cpu_repack_bytes=repack.n_bytes,
        cpu_repack_source=repack.source,
        cpu_repack_types=repack.types,
        rs_bytes=rs_bytes,
        n_seq=preset_n_seq(preset),
        recurrent=recurrent_state(model),
    )
    return dataclasses.replace(ledger, reason=verdict_reason(ledger))


def predicted_total_bytes(model: ModelInfo, preset: Preset, device: DeviceProfile, *, ctx_size: int | None = None) -> int:
    """predict_ledger's total alone (weights, CPU repack, KV, recurrent state, compute, overhead), without the
    lines that price it (largest contexts, fixes, speed): what a search over contexts needs."""
    n_ctx = llama_n_ctx(model, preset.ctx_size if ctx_size is None else ctx_size)
    return (predicted_weights_bytes(model, preset.weights, mapped=preset.mmap) + preset_repack(model, preset, device).n_bytes
            + preset_kv_bytes(model, preset, n_ctx) + predicted_rs_bytes(model, preset_n_seq(preset))
            + predicted_compute_bytes(model, preset, n_ctx) + predicted_overhead_bytes(model))


def predicted_resident(weights_bytes: int, kv_bytes: int, prompt_compute_bytes: int, overhead_bytes: int,
                       preset: Preset) -> ResidentMemory:
    """What the engine's RSS shows after load and after a prompt that fills the context.

    After load: the process and llama.cpp's host structures (the overhead line), the weights
    (mmap: llama.cpp prefetches the mapping with MAP_POPULATE, so the pages are resident;
    without mmap they are read into memory) and the KV cache (llama.cpp zeroes it at load).
    The compute buffer is reserved but untouched until the first decode; a prompt that
    fills the context writes its attention and feed-forward part, not the logits area
    (a chat prompt asks for the last token's logits only).
    """
    weights_how = "mmap, prefetched" if preset.mmap else "read into memory"
    after_load = overhead_bytes + weights_bytes + kv_bytes
    return ResidentMemory(
        after_load_bytes=after_load,
        after_load_source=f"overhead + weights ({weights_how}) + KV cache (zeroed at load)",
        after_prompt_bytes=after_load + prompt_compute_bytes,
        after_prompt_source="after load + the compute buffer a full-context prompt writes (all but the logits area)",
    )


def decode_tps_bound(bandwidth_gbs: float, weights_bytes: int, kv_bytes_full: int) -> tuple[float, float]:
    """Bandwidth-bound decode speed (empty, full context): each token reads all weights plus the live KV."""
    if bandwidth_gbs <= 0 or weights_bytes <= 0:
        return (0.0, 0.0)
    bandwidth = bandwidth_gbs * 1e9
    return (bandwidth / weights_bytes, bandwidth / (weights_bytes + kv_bytes_full))
