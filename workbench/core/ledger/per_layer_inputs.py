"""Gemma 3n's per-layer inputs in the compute buffer: the per-layer token embedding, projected and kept for every layer."""

from __future__ import annotations

from workbench.core.gguf.model_info import ModelInfo

PER_LAYER_EMBEDDING = "per_layer_token_embd.weight"  # [n_embd_altup x n_layer, n_vocab]
ALTUP = 4  # llama-hparams.h n_altup: copies of the residual stream gemma3n carries


def per_layer_width(model: ModelInfo) -> int:
    """Floats per token of the per-layer inputs (n_embd_altup x n_layer), 0 for a model without them."""
    for tensor in model.tensors:
        if tensor.name == PER_LAYER_EMBEDDING and tensor.shape:
            return tensor.shape[0]
    return 0


def per_layer_stages(model: ModelInfo, attention: float, feed_forward: float, mask_cells: int,
                     flash_attn: bool) -> tuple[float, float]:
    """(attention, feed-forward) floats per ubatch token with the per-layer inputs, for a model that has them.

    gemma3n.cpp builds the per-layer inputs before the first layer: the rows of
    per_layer_token_embd (P = n_embd_altup x n_layer floats a token), the projection of the
    embedding to P, its norm, their sum and a contiguous permuted copy, which stays live for
    every layer. ggml-alloc's peak there is 4 P plus the embedding's altup stack (4 n_embd;
    2 n_embd with flash attention) over the KQ masks. Inside the layers the permuted inputs (P),
    the altup stack and its predictions (2 x 4 n_embd) sit under each stage. Read from llama.cpp's reported
    compute buffer on two tiny gemma3n shapes (P 6,400 with n_embd 128, P 5,632 with n_embd 256)
    at ctx 1024-8192, ubatch 128-512, flash on and off: within 0.1% (tests/test_arch_attention_ledger.py).
    """
    width = per_layer_width(model)
    if not width:
        return attention, feed_forward
    mask = mask_cells / 2 if flash_attn else mask_cells
    projection = 4 * width + (2 if flash_attn else 4) * model.n_embd + mask
    live = width + 2 * ALTUP * model.n_embd
    return max(attention + live, projection), feed_forward + live
