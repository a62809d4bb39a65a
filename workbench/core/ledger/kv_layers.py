"""Each layer's KV cache as llama.cpp sizes it, sliding-window (SWA) layers included."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.config.preset import Preset
from workbench.core.gguf.ggml_types import cache_type
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.cache_sharing import owning_layer_count
from workbench.core.ledger.indexer_cache import indexer_cache
from workbench.core.ledger.mla import latent_cache
from workbench.core.ledger.mtp import mtp_layers
from workbench.core.ledger.recurrent import attention_flags

CTX_PAD = 256  # llama-context.cpp pads n_ctx (and n_ctx_seq) to 256; the SWA cache too
TENSOR_ALIGNMENT = 32  # ggml CPU buffer alignment: every KV tensor starts on it

# How llama.cpp decides which layers slide, per architecture (src/models/<arch>.cpp,
# load_arch_hparams, llama.cpp 0c1e570): (window when the GGUF gives none, pattern period,
# dense_first, needs the window key). Pattern n: layer il slides unless il % n == n - 1
# (dense_first: unless il % n == 0); a `sliding_window_pattern` key overrides the period,
# or gives one flag per layer when it is an array. "needs key": without
# `<arch>.attention.sliding_window` > 0 the model has no SWA at all (gemma3, olmo2).
# phi3 reads a window but llama.cpp disables its SWA ("Phi SWA is currently disabled").
SWA_ARCHITECTURES: dict[str, tuple[int, int, bool, bool]] = {
    "gemma2": (4096, 2, False, False),
    "gemma3": (0, 6, False, True),
    "gemma3n": (0, 5, False, True),
    "cohere2": (0, 4, False, True),
    "olmo2": (0, 4, False, True),
    "gpt-oss": (0, 2, False, True),
    "llama4": (8192, 4, False, False),  # chunked attention; sized like a window
}


@dataclass(frozen=True)
class SlidingWindow:
    """Which layers keep only a window of the context, and how wide it is."""

    n_swa: int  # window in tokens
    is_swa: tuple[bool, ...]  # one flag per layer
    source: str  # where the window and the pattern were read

    @property
    def n_swa_layers(self) -> int:
        return sum(self.is_swa)


@dataclass(frozen=True)
class LayerKV:
    """One layer's K and V cache tensors as llama.cpp allocates them."""

    layer: int
    is_swa: bool
    cells: int  # KV cells of this layer's cache (per stream)
    k_bytes: int
    v_bytes: int
    indexer_bytes: int = 0  # DSA's indexer key tensor of this layer (ledger.indexer_cache)

    @property
    def n_bytes(self) -> int:
        return self.k_bytes + self.v_bytes + self.indexer_bytes


@dataclass(frozen=True)
class KVCells:
    """The cell counts of the two caches: global (full-context) layers and SWA layers."""

    global_cells: int
    swa_cells: int  # 0 when the model has no SWA layers
    n_swa: int  # the window, 0 without SWA
    swa_full: bool


def _positive_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def sliding_window(model: ModelInfo) -> SlidingWindow | None:
    """The model's SWA layers as llama.cpp will set them, or None when no layer slides."""
    rule = SWA_ARCHITECTURES.get(model.architecture)
    if rule is None or model.n_layer <= 0:
        return None
    default_window, period, dense_first, needs_key = rule
    arch = model.architecture
    window_key, pattern_key = f"{arch}.attention.sliding_window", f"{arch}.attention.sliding_window_pattern"
    window = _positive_int(model.metadata.get(window_key))
    if not window and (needs_key or not default_window):
        return None
    source = window_key if window else f"{arch} default window (llama.cpp)"
    window = window or default_window
    pattern = model.metadata.get(pattern_key)
    if isinstance(pattern, tuple) and len(pattern) >= model.n_layer:
        is_swa = tuple(bool(flag) for flag in pattern[: model.n_layer])
        source += f", {pattern_key} (per layer)"
    else:
        if _positive_int(pattern) and pattern <= model.n_layer:
            period = pattern
            source += f", {pattern_key} = {period}"
        else:
            source += f", {arch} pattern of {period} (llama.cpp)"
        if dense_first:
            is_swa = tuple(il % period != 0 for il in range(model.n_layer))
        else:
            is_swa = tuple(il % period < period - 1 for il in range(model.n_layer))
    if not any(is_swa):
        return None
    return SlidingWindow(n_swa=window, is_swa=is_swa, source=source)


def n_ubatch_of(ctx_cells: int, batch_size: int, ubatch_size: int) -> int:
    """llama.cpp's n_ubatch: n_batch is capped at n_ctx (causal models), n_ubatch at n_batch."""
    n_batch = min(ctx_cells, batch_size) if batch_size > 0 else ctx_cells
    return max(1, min(n_batch, ubatch_size if ubatch_size > 0 else n_batch))


def kv_cells(model: ModelInfo, n_ctx: int, *, n_ubatch: int, swa_full: bool = False, n_seq: int = 1,
             kv_unified: bool = False) -> KVCells:
    """Cells of the global and the SWA cache (llama-kv-cache-iswa.cpp, llama.cpp 0c1e570).

    size_swa = GGML_PAD(min(size_base, n_swa * (unified ? n_seq : 1) + n_ubatch), 256),
    or size_base with swa_full. size_base is n_ctx_seq: n_ctx / n_seq padded to 256 per
    sequence (one stream per sequence) unless the cache is unified.
    """
    n_seq = max(1, n_seq)
    size_base = n_ctx if kv_unified else -(-(n_ctx // n_seq) // CTX_PAD) * CTX_PAD
    window = sliding_window(model)
    if window is None:
        return KVCells(global_cells=size_base, swa_cells=0, n_swa=0, swa_full=swa_full)
    if swa_full:
        size_swa = size_base
    else:
        wanted = min(size_base, window.n_swa * (n_seq if kv_unified else 1) + n_ubatch)
        size_swa = -(-wanted // CTX_PAD) * CTX_PAD
    return KVCells(global_cells=size_base, swa_cells=size_swa, n_swa=window.n_swa, swa_full=swa_full)


def _aligned(n_bytes: int) -> int:
    return -(-n_bytes // TENSOR_ALIGNMENT) * TENSOR_ALIGNMENT


def predicted_kv_layers(model: ModelInfo, n_ctx: int, type_k: str, type_v: str, *, n_ubatch: int,
                        swa_full: bool = False, flash_attn: bool = True, n_seq: int = 1,
                        kv_unified: bool = False) -> tuple[LayerKV, ...]:
    """Bytes of each layer's KV cache (llama-kv-cache.cpp): the unit a per-device ledger adds up.

    Each layer with attention has a K tensor [n_embd_k_gqa, cells, n_stream] and a V tensor
    [n_embd_v_gqa, cells, n_stream]; without flash attention V is stored transposed and
    padded to the widest layer's V. A layer without KV heads (recurrent) has no cache and
    is left out, and so is one that reuses an earlier layer's cache (cache_sharing). With MLA
    (ledger.mla) the K tensor holds the compressed latent and there is no V tensor; DSA adds
    an indexer key tensor [key_length, cells, n_stream] in the K type (ledger.indexer_cache).
    `n_ctx` is llama.cpp's padded context (see ledger.llama_n_ctx).
    """
    cells = kv_cells(model, n_ctx, n_ubatch=n_ubatch, swa_full=swa_full, n_seq=n_seq, kv_unified=kv_unified)
    window = sliding_window(model)
    n_stream = 1 if kv_unified else max(1, n_seq)
    k_type, v_type = cache_type(type_k), cache_type(type_v)
    heads = attention_kv_heads(model)
    widest_v = max(heads, default=0) * model.head_dim_v
    has_v = latent_cache(model) is None
    owning = owning_layer_count(model)
    indexer = indexer_cache(model)
    layers = []
    for il, n_head_kv in enumerate(heads):
        if n_head_kv == 0 or il >= owning:
            continue
        is_swa = window is not None and window.is_swa[il]
        n_cells = cells.swa_cells if is_swa else cells.global_cells
        k_values = n_head_kv * model.head_dim_k * n_cells * n_stream
        v_width = n_head_kv * model.head_dim_v if flash_attn else widest_v
        v_values = v_width * n_cells * n_stream if has_v else 0
        indexer_values = (indexer.width(il) if indexer else 0) * n_cells * n_stream
        layers.append(LayerKV(
            layer=il,
            is_swa=is_swa,
            cells=n_cells,
            k_bytes=_aligned(k_values // k_type.block_size * k_type.type_size),
            v_bytes=_aligned(v_values // v_type.block_size * v_type.type_size),
            indexer_bytes=_aligned(indexer_values // k_type.block_size * k_type.type_size),
        ))
    return tuple(layers)


def attention_kv_heads(model: ModelInfo) -> list[int]:
    """KV heads per layer; 0 for a layer without a KV cache (a recurrent layer: ledger/recurrent.py, or an
    MTP block)."""
    per_layer = model.n_head_kv_per_layer
    attends = attention_flags(model)
    trunk = model.n_layer - mtp_layers(model)
    return [(per_layer[il] if il < len(per_layer) else model.n_head_kv) if attends[il] and il < trunk else 0
            for il in range(model.n_layer)]


def preset_n_ubatch(preset: Preset, n_ctx: int) -> int:
    """The n_ubatch llama.cpp will use for `preset` at context `n_ctx`."""
    return n_ubatch_of(n_ctx, preset.batch_size, preset.ubatch_size)
