"""Which layers own a KV cache, for families whose last layers reuse earlier layers' caches."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.gguf.model_info import ModelInfo

# One row per family (llama.cpp 0c1e570): how load_arch_hparams sets n_layer_kv_from_start, the
# count of leading layers that own a cache (llama_hparams::has_kv). (fixed count, key of the
# shared-layer count): gemma3n hard-codes 20 (src/models/gemma3n.cpp); gemma4 owns
# n_layer - `<arch>.attention.shared_kv_layers`. The later layers reuse the last owning layer of
# their kind (llama-model.cpp create_memory: n_layer_kv_from_start - 2 for a window layer, - 1
# for a global one), so they add no cache of their own.
KV_FROM_START: dict[str, tuple[int, str]] = {
    "gemma3n": (20, ""),
    "gemma4": (0, "attention.shared_kv_layers"),
}


@dataclass(frozen=True)
class SharedCaches:
    owning_layers: int  # the first this many layers own a cache
    shared_layers: int  # the rest reuse one
    source: str


def shared_caches(model: ModelInfo) -> SharedCaches | None:
    """The split, or None when every layer owns its cache."""
    rule = KV_FROM_START.get(model.architecture)
    if rule is None or model.n_layer <= 0:
        return None
    fixed, shared_key = rule
    if shared_key:
        shared = model.metadata.get(f"{model.architecture}.{shared_key}")
        if not isinstance(shared, int) or isinstance(shared, bool) or not 0 < shared < model.n_layer:
            return None
        owning, source = model.n_layer - shared, f"{model.architecture}.{shared_key} = {shared}"
    else:
        owning, source = fixed, f"{model.architecture}: llama.cpp keeps KV for the first {fixed} layers"
    if owning >= model.n_layer:
        return None
    return SharedCaches(owning_layers=owning, shared_layers=model.n_layer - owning, source=source)


def owns_cache(model: ModelInfo, layer: int) -> bool:
    sharing = shared_caches(model)
    return sharing is None or layer < sharing.owning_layers


def owning_layer_count(model: ModelInfo) -> int:
    """How many leading layers own a cache: all of them unless the family shares caches."""
    sharing = shared_caches(model)
    return sharing.owning_layers if sharing else model.n_layer
