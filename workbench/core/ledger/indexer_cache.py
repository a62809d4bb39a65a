"""DeepSeek sparse attention (DSA): the lightning indexer's key cache llama.cpp keeps beside MLA's latent."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.mtp import mtp_layers

# GLM-5.2's indexer layout (llama.cpp 0c1e570, src/models/glm-dsa.cpp GLM_5_2_DEFAULT_INDEXER_TYPES):
# layers 0 and 1 and every fourth from layer 2 compute their own top-k; the others reuse it
GLM_5_2_CONTEXT = 1048576  # a file without indexer.types gets that layout from this training context on


def _glm_5_2_full(layer: int) -> bool:
    return layer < 2 or (layer - 2) % 4 == 0


@dataclass(frozen=True)
class IndexerRule:
    """How one family chooses the layers that keep indexer keys."""

    reads_types: bool  # `<arch>.attention.indexer.types` (1 full, 0 shared) picks them
    long_context_default: int  # n_ctx_train from which a file without the key gets GLM-5.2's layout (0: never)


# The families llama.cpp runs on llama-kv-cache-dsa.cpp: a second llama_kv_cache with one key head
# of `<arch>.attention.indexer.key_length` values per cell on each layer that computes its own top-k,
# no V, in the K cache type, with the same cells and streams as the MLA cache (create_memory passes
# both the same kv_size and n_seq_max). deepseek32 runs the indexer on every layer; glm-dsa only on
# its "full" layers (the "shared" ones reuse the last full layer's top-k and keep no keys).
# deepseek4 (llama-kv-cache-dsv4.cpp, compressed CSA/HCA caches), hy_v4 (llama-kv-cache-msa.cpp) and
# glm5-next (llama-memory-hybrid-idx.cpp, pooled keys) keep indexer caches laid out otherwise: not rows here.
INDEXER_ARCHITECTURES: dict[str, IndexerRule] = {
    "deepseek32": IndexerRule(reads_types=False, long_context_default=0),
    "glm-dsa": IndexerRule(reads_types=True, long_context_default=GLM_5_2_CONTEXT),
}


@dataclass(frozen=True)
class IndexerCache:
    """The indexer's key cache: which layers keep it and what a cell holds."""

    key_length: int  # values per cell and layer (one key head)
    n_heads: int  # query heads scoring against it (not stored)
    top_k: int  # cells each query attends to
    layers: tuple[int, ...]  # the layers that keep indexer keys
    n_layer: int  # the trunk's layers (the MTP blocks keep none)
    source: str

    def width(self, layer: int) -> int:
        """Values per cell this layer's indexer cache holds (0: none)."""
        return self.key_length if layer in self.layers else 0


def _uint(model: ModelInfo, name: str) -> int:
    value = model.metadata.get(f"{model.architecture}.{name}")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _full_layers(model: ModelInfo, rule: IndexerRule) -> tuple[tuple[bool, ...], str]:
    arch, n_layer = model.architecture, model.n_layer
    types_key = f"{arch}.attention.indexer.types"
    types = model.metadata.get(types_key) if rule.reads_types else None
    if isinstance(types, tuple) and len(types) >= n_layer:
        return tuple(bool(flag) for flag in types[:n_layer]), f"{types_key} (per layer)"
    if rule.long_context_default and model.n_ctx_train >= rule.long_context_default:
        return (tuple(_glm_5_2_full(il) for il in range(n_layer)),
                f"no {types_key}, training context {model.n_ctx_train:,}: GLM-5.2's layout (llama.cpp)")
    return (True,) * n_layer, f"{arch}: indexer on every layer (llama.cpp)"


def indexer_cache(model: ModelInfo) -> IndexerCache | None:
    """The model's indexer key cache as llama.cpp allocates it, or None when it keeps none."""
    rule = INDEXER_ARCHITECTURES.get(model.architecture)
    key_length = _uint(model, "attention.indexer.key_length")
    if rule is None or not key_length or model.n_layer <= 0:
        return None
    full, layers_source = _full_layers(model, rule)
    trunk = model.n_layer - mtp_layers(model)  # the MTP blocks keep no indexer keys in the main context
    layers = tuple(il for il in range(trunk) if full[il])
    if not layers:
        return None
    return IndexerCache(
        key_length=key_length, n_heads=_uint(model, "attention.indexer.head_count"),
        top_k=_uint(model, "attention.indexer.top_k"), layers=layers, n_layer=trunk,
        source=(f"{model.architecture}.attention.indexer.key_length = {key_length}, {layers_source}; "
                f"one key head per cell in the K cache type (llama-kv-cache-dsa.cpp)"),
    )


def describe(cache: IndexerCache) -> str:
    """One line for `inspect`: what the indexer keeps."""
    where = ("every layer" if len(cache.layers) == cache.n_layer
             else f"{len(cache.layers)} of {cache.n_layer} layers (the others reuse the last one's top-k)")
    return (f"DSA lightning indexer: a second cache of {cache.key_length} key values per cell on {where}, "
            f"no V; {cache.n_heads} indexer heads pick the top {cache.top_k:,} cells for MLA")
