"""Multi-head latent attention (MLA): the compressed cache llama.cpp keeps instead of per-head K and V."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.gguf.model_info import ModelInfo

# The architectures whose load_arch_hparams read `<arch>.attention.key_length_mla` and
# `value_length_mla` (llama.cpp 0c1e570, src/models/<arch>.cpp). With both keys set,
# llama_hparams::is_mla() holds and llama-kv-cache.cpp allocates a K tensor only: each cell
# holds the compressed latent plus the rope part (the file's key_length = kv_lora_rank +
# rope dims, over one KV head) and no V (the latent doubles as V). Without the keys (older
# deepseek2 conversions) the model runs as plain multi-head attention.
# deepseek32 and glm-dsa add the DSA indexer's key cache (ledger.indexer_cache). hy_v4 (spelled
# with an underscore in llama.cpp's architecture list; llama-kv-cache-msa.cpp) and glm5-next
# (a recurrent part, llama-memory-hybrid-idx.cpp) keep further caches the ledger does not count.
MLA_ARCHITECTURES = frozenset({
    "deepseek2", "deepseek32", "bailingmoe3", "dots3note", "glm-dsa", "glm5-next", "hy_v4", "kimi-k3", "kimi-linear",
})


@dataclass(frozen=True)
class LatentCache:
    """What one MLA layer's cache cell holds."""

    kv_lora_rank: int  # the compressed latent (0 when the file does not say)
    rope_dims: int  # the decoupled rope part stored beside it
    k_width: int  # values per cell: the file's key_length x KV heads
    head_dim_k: int  # per query head after decompression (key_length_mla)
    head_dim_v: int  # value_length_mla
    source: str


def _key(model: ModelInfo, name: str) -> int:
    value = model.metadata.get(f"{model.architecture}.{name}")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def latent_cache(model: ModelInfo) -> LatentCache | None:
    """The model's MLA cache as llama.cpp allocates it, or None when it runs without MLA."""
    if model.architecture not in MLA_ARCHITECTURES:
        return None
    k_mla, v_mla = _key(model, "attention.key_length_mla"), _key(model, "attention.value_length_mla")
    if not (k_mla and v_mla):
        return None
    rank = _key(model, "attention.kv_lora_rank")
    rope = _key(model, "rope.dimension_count")
    arch = model.architecture
    return LatentCache(
        kv_lora_rank=rank, rope_dims=rope, k_width=model.head_dim_k * max(1, model.n_head_kv),
        head_dim_k=k_mla, head_dim_v=v_mla,
        source=f"{arch}.attention.key_length_mla/value_length_mla set: K latent only, no V (llama-kv-cache.cpp)",
    )


def describe(cache: LatentCache) -> str:
    """One line for `inspect`: what a cell holds."""
    parts = f"latent {cache.kv_lora_rank} + rope {cache.rope_dims}" if cache.kv_lora_rank else f"{cache.k_width} values"
    return (f"MLA: cache holds the compressed K ({parts} = {cache.k_width} per cell and layer), no V; "
            f"heads decompress to K {cache.head_dim_k} / V {cache.head_dim_v}")
