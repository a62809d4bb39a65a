"""The compute buffer llama.cpp reserves: its widest graph stage, replayed from the allocator where the family is known."""

from __future__ import annotations

from math import ceil

from workbench.core.config.preset import Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.graph_families import laid_out_compute_bytes
from workbench.core.ledger.kv_layers import kv_cells, preset_n_ubatch
from workbench.core.ledger.per_layer_inputs import per_layer_stages
from workbench.core.ledger.sequences import preset_kv_unified, preset_n_seq


def feed_forward_length(model: ModelInfo) -> int:
    value = model.metadata.get(f"{model.architecture}.feed_forward_length")
    if isinstance(value, tuple):
        value = max((v for v in value if isinstance(v, int)), default=0)
    if isinstance(value, int) and value > 0:
        return value
    for tensor in model.tensors:  # fall back on the FFN's shape
        if tensor.name.endswith("ffn_up.weight") and len(tensor.shape) >= 2:
            return tensor.shape[1]
    return 4 * model.n_embd


def predicted_compute_bytes(model: ModelInfo, preset: Preset, n_ctx: int) -> int:
    """The CPU compute buffer llama.cpp reserves: the peak of its graph allocator.

    For a family graph_families lays out, it is the allocator's peak over the reserve graph;
    otherwise see the derivation in the comments of `_stage_widths`.
    """
    laid_out = laid_out_compute_bytes(model, preset, n_ctx)
    if laid_out is not None:
        return laid_out
    n_ubatch = preset_n_ubatch(preset, n_ctx)
    return ceil(max(_compute_stages(model, preset, n_ctx)) * 4 * n_ubatch)


def predicted_prompt_compute_bytes(model: ModelInfo, preset: Preset, n_ctx: int) -> int:
    """The part of the compute buffer a chat prompt writes: a full-context ubatch that asks for
    the last token's logits only, so the n_vocab x n_ubatch logits area stays untouched."""
    attention, feed_forward, _ = _compute_stages(model, preset, n_ctx)
    return ceil(max(attention, feed_forward) * 4 * preset_n_ubatch(preset, n_ctx)) + 4 * model.n_vocab


def _compute_stages(model: ModelInfo, preset: Preset, n_ctx: int) -> tuple[float, float, float]:
    n_ubatch = preset_n_ubatch(preset, n_ctx)
    swa_cells = kv_cells(model, n_ctx, n_ubatch=n_ubatch, swa_full=preset.swa_full, n_seq=preset_n_seq(preset),
                         kv_unified=preset_kv_unified(preset)).swa_cells
    attention, feed_forward, logits = _stage_widths(model, n_ctx, swa_cells, preset.flash_attn)
    attention, feed_forward = per_layer_stages(model, attention, feed_forward, n_ctx + swa_cells, preset.flash_attn)
    return attention, feed_forward, logits


def _expert_ff(model: ModelInfo) -> int | None:
    """Floats per token the mixture-of-experts feed-forward keeps live, None for a dense model."""
    def key(name: str) -> int:
        value = model.metadata.get(f"{model.architecture}.{name}")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    n_expert, n_used = key("expert_count"), key("expert_used_count")
    if n_expert <= 1 or n_used <= 0:
        return None
    n_ff_exp = key("expert_feed_forward_length") or feed_forward_length(model)
    routed = 3 * n_used * n_ff_exp + n_expert  # gate and up of each used expert, their product; router logits
    shared = key("expert_shared_feed_forward_length")
    if not shared and any("_shexp." in tensor.name for tensor in model.tensors):
        shared = feed_forward_length(model)  # qwen2moe: the shared expert is feed_forward_length wide
    # the shared expert runs after the routed ones, over their n_embd-wide sum
    return max(routed, 3 * shared + 2 * model.n_embd) if shared else routed


def _stage_widths(model: ModelInfo, n_ctx: int, swa_cells: int, flash_attn: bool) -> tuple[float, float, float]:
    """Floats per ubatch token live at llama.cpp's three graph stages: (attention, feed-forward, logits).

    The compute buffer is the peak of llama.cpp's CPU graph allocator for one worst-case ubatch.

    llama.cpp reserves the compute buffer by laying out the graph of a full ubatch
    (n_tokens = min(n_ubatch, n_ctx), every token an output, all n_ctx KV cells visible)
    with ggml-alloc, which frees each intermediate after its last use. The buffer is the
    peak of live f32 activations, which is one of three stages, each n_tokens x 4 bytes x
    (q = n_head x head_dim_k, kv = n_head_kv x (head_dim_k + head_dim_v)):

      attention (no flash attn)  n_ctx*n_head      the KQ scores of a full-context layer, softmaxed in place
                                 + mask            f32 KQ masks, inputs live for all layers: n_ctx cells,
                                                   plus the window cache's cells on a sliding-window model
                                 + 3*n_embd + 2*q + kv   residual, norms, Q (roped), K, V, attention out
      attention (flash attn)     mask/2            the masks in f16; no score matrix exists
                                 + 4*n_embd + 3*q + 2*kv  (Q, K, V and their f16 copies for the kernel)
      feed-forward               3*n_ff + mask + 4*n_embd   gate, up, their SwiGLU product
                                 mixture of experts: 3 x used experts x expert n_ff + the router's
                                 logits, or a shared expert's 3*n_ff + 2*n_embd, whichever is larger
      logits                     n_vocab + 3*n_embd (2.5 with flash attn)
                                                   logits (n_vocab x n_ubatch x 4 bytes) over the
                                                   final norm and what is still live below it

    Derived from llama.cpp's graph (llama-graph.cpp build_attn / build_ffn / build_moe_ffn) and
    checked against its reported buffer on every architecture of tests/arch_models.py, varying
    n_ctx 512-16384, n_ubatch 64-512, flash attention and the KV type
    (tests/test_arch_ledger.py, benchmarks/ledger_accuracy.py): the attention and
    feed-forward stages match to under 1%. Where the logits stage is the peak, what lies under
    the logits is not a count: ggml-alloc puts each tensor in the smallest free fragment that holds
    it, so the families graph_families transcribes are laid out instead.
    """
    n_embd, n_head, n_head_kv = model.n_embd, model.n_head, model.n_head_kv
    q = n_head * model.head_dim_k
    kv = n_head_kv * (model.head_dim_k + model.head_dim_v)
    mask_cells = n_ctx + swa_cells
    if flash_attn:
        mask = mask_cells / 2  # f16 masks, in f32 units
        attention = mask + 4 * n_embd + 3 * q + 2 * kv
        logits = model.n_vocab + 2.5 * n_embd
    else:
        mask = mask_cells
        attention = n_ctx * n_head + mask + 3 * n_embd + 2 * q + kv
        logits = model.n_vocab + 3 * n_embd
    expert_ff = _expert_ff(model)
    ff_width = expert_ff if expert_ff is not None else 3 * feed_forward_length(model)
    feed_forward = ff_width + mask + 4 * n_embd
    return attention, feed_forward, logits
