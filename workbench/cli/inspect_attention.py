"""What `workbench inspect` says of a model's attention cache: MLA's latent cache, DSA's indexer key cache and caches
shared between layers."""

from __future__ import annotations

from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger import indexer_cache as dsa
from workbench.core.ledger.cache_sharing import shared_caches
from workbench.core.ledger.mla import describe, latent_cache
from workbench.core.ledger.mtp import mtp_layers


def attention_text(info: ModelInfo, heads: str) -> str:
    """The attention line: head dims, or MLA's per-head dims with no stored V."""
    cache = latent_cache(info)
    if cache is None:
        return f"{heads}, head dim K {info.head_dim_k} / V {info.head_dim_v}"
    return f"{info.n_head} query heads over one compressed latent (MLA), head dim K {cache.head_dim_k} / V {cache.head_dim_v}"


def attention_lines(info: ModelInfo) -> list[tuple[str, str]]:
    lines = []
    cache = latent_cache(info)
    if cache is not None:
        lines.append(("KV cache", f"{describe(cache)} ({cache.source})"))
    indexer = dsa.indexer_cache(info)
    if indexer is not None:
        lines.append(("indexer cache", f"{dsa.describe(indexer)} ({indexer.source})"))
    sharing = shared_caches(info)
    if sharing is not None:
        lines.append(("shared caches", f"layers 0-{sharing.owning_layers - 1} own a KV cache; the last "
                                       f"{sharing.shared_layers} reuse one of theirs ({sharing.source})"))
    mtp = mtp_layers(info)
    if mtp:
        lines.append(("MTP blocks", f"the last {mtp} of {info.n_layer} ({info.architecture}.nextn_predict_layers): "
                                    "the draft head; no KV cache in the main context, weights not loaded (mapped with mmap)"))
    return lines


def attention_json(info: ModelInfo) -> dict:
    cache, sharing, indexer = latent_cache(info), shared_caches(info), dsa.indexer_cache(info)
    return {
        "mla": None if cache is None else {"kv_lora_rank": cache.kv_lora_rank, "rope_dims": cache.rope_dims,
                                           "k_values_per_cell": cache.k_width, "stores_v": False,
                                           "head_dim_k": cache.head_dim_k, "head_dim_v": cache.head_dim_v,
                                           "source": cache.source},
        "indexer_cache": None if indexer is None else {"key_length": indexer.key_length, "n_heads": indexer.n_heads,
                                                       "top_k": indexer.top_k, "layers": list(indexer.layers),
                                                       "stores_v": False, "source": indexer.source},
        "shared_caches": None if sharing is None else {"owning_layers": sharing.owning_layers,
                                                       "shared_layers": sharing.shared_layers,
                                                       "source": sharing.source},
        "mtp_layers": mtp_layers(info),
    }
