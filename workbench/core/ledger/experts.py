"""Mixture-of-experts facts from a GGUF header: experts per layer, used per token, shared, and their bytes."""

from __future__ import annotations

from workbench.core.gguf.ggml_types import tensor_bytes
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.types import ExpertCounts
from workbench.core.ledger.weights import planned_tensor_types

# llama.cpp stores each layer's routed experts as one 3-D tensor per projection
# ([n_embd, n_ff_exp, n_expert] for gate/up, [n_ff_exp, n_embd, n_expert] for down): names
# end in "_exps.weight" (ffn_gate_exps, ffn_up_exps, ffn_down_exps, ffn_gate_up_exps).
# Shared experts are "_shexp" tensors, which every token uses.
_ROUTED = "_exps."
_SHARED = "_shexp."


def _count(model: ModelInfo, key: str) -> int:
    value = model.metadata.get(f"{model.architecture}.{key}")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def expert_counts(model: ModelInfo, weights: str = "keep") -> ExpertCounts | None:
    """The experts of a MoE model (None for a dense one); bytes as `weights` would store them.

    A decoded token reads the attention, the router, the shared experts and `used` of the
    `total` routed experts of every layer: the routed experts' bytes count used/total.
    """
    total, used = _count(model, "expert_count"), _count(model, "expert_used_count")
    if total <= 1 or used <= 0:
        return None
    used = min(used, total)
    sizes = dict(_tensor_sizes(model, weights))
    expert_bytes = sum(n for name, n in sizes.items() if _ROUTED in name)
    all_bytes = sum(sizes.values())
    shared = _count(model, "expert_shared_count")
    if not shared and any(_SHARED in name for name in sizes):
        shared = 1  # qwen2moe: one shared expert, present as tensors only
    active = all_bytes - expert_bytes + expert_bytes * used // total
    return ExpertCounts(total=total, used=used, shared=shared, expert_bytes=expert_bytes,
                        active_bytes_per_token=active)


def _tensor_sizes(model: ModelInfo, weights: str) -> list[tuple[str, int]]:
    if weights.lower() == "keep" or (model.file_type is not None and weights.upper() == model.file_type):
        return [(t.name, t.n_bytes) for t in model.tensors]

    return [(t.name, t.n_bytes if kind == t.ggml_type else tensor_bytes(kind, t.shape))
            for t, kind in planned_tensor_types(model, weights)]
