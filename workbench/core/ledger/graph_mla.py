"""Reserve graphs of the MLA families: deepseek2 (multi-head latent attention over a K-only cache) and deepseek32 /
glm-dsa (the same, with DeepSeek sparse attention's lightning indexer choosing the cells each query sees).

Transcribed from llama.cpp 0c1e570: src/models/deepseek2.cpp, deepseek32.cpp, glm-dsa.cpp (graph::graph),
src/llama-graph.cpp (build_attn_inp_k / build_attn_inp_k_dsa, build_attn over llm_graph_input_attn_k and
llm_graph_input_attn_k_dsa, build_attn_mha with v_mla), src/llama-kv-cache.cpp (cpy_k, get_k, build_input_k_rot)
and ggml/src/ggml.c (ggml_lightning_indexer, ggml_top_k, ggml_concat, ggml_fill, ggml_set_rows). The reserve
graph takes the fused indexer: llama_context sets cparams.fused_lid and never probes it (auto_flid false), and
the CPU backend runs GGML_OP_LIGHTNING_INDEXER; its mask is f16 whatever flash attention is.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.ledger.graph_alloc import Tensor
from workbench.core.ledger.graph_build import F16, I32, I64, Graph
from workbench.core.ledger.graph_layers import (
    Inputs,
    Route,
    Shape,
    declare_inputs,
    dense_ffn,
    embeddings,
    moe_ffn,
    shared_expert,
)


@dataclass(frozen=True)
class MlaShape:
    """The MLA and indexer widths of a deepseek2 / deepseek32 / glm-dsa file (llama_hparams)."""

    q_lora_rank: int  # n_lora_q; 0: one Q projection (deepseek2's lite files)
    kv_lora_rank: int  # n_lora_kv: the latent, which doubles as V
    rope_dims: int  # n_rot: the decoupled rope part of each head, cached beside the latent
    k_mla: int  # n_embd_head_k_mla: a head after decompression (nope + rope)
    v_mla: int  # n_embd_head_v_mla
    n_layer: int  # the trunk's layers (the file's blocks less its NextN/MTP ones)
    n_dense_lead: int  # n_layer_dense_lead: the first layers run a dense SwiGLU instead of the experts
    n_ff_dense: int
    k_type_size: float  # K cache bytes per value: its latent is V as well, read through a view
    weights_norm: bool = False  # expert_weights_norm
    route: Route = Route()  # sigmoid gating, selection bias, expert groups, weight scale (DeepSeek-V3 on)
    indexer_heads: int = 0  # 0: no lightning indexer (deepseek2)
    indexer_dim: int = 0
    indexer_top_k: int = 0
    indexer_full: tuple[bool, ...] = ()  # per layer: it scores its own top-k (glm-dsa's "shared" ones reuse it)


@dataclass(frozen=True)
class _IndexerInputs:
    k_idxs: Tensor
    mask: Tensor  # f16: the fused lightning indexer asks for it
    rotation: Tensor  # the Hadamard rotation llama-kv-cache.cpp always makes for the indexer keys


def indexer_rotation_side(indexer_dim: int) -> int:
    """llama_kv_cache::build_input_k_rot: the largest power of two from 64 up dividing the key width (64 else)."""
    side = 64
    while indexer_dim > 0 and indexer_dim % (side * 2) == 0:
        side *= 2
    return side


def mla_graph(shape: Shape, mla: MlaShape, n_vocab: int) -> Graph:
    """deepseek2 / deepseek32 / glm-dsa graph::graph over one ubatch."""
    g, s, m = Graph(), shape, mla
    inp = declare_inputs(g, s)
    x = embeddings(g, s, inp, n_vocab)
    indexer = None
    if m.indexer_heads:
        indexer = _IndexerInputs(k_idxs=g.input(s.n_tokens, type_size=I64),
                                 mask=g.input(s.n_kv, s.n_tokens, type_size=F16),
                                 rotation=g.input(m.indexer_dim, m.indexer_dim))
    top_k = None
    for il in range(m.n_layer):
        residual = x
        cur = g.rms_norm(x)
        qr = g.rms_norm(g.mul_mat(g.weight(), cur, m.q_lora_rank)) if m.q_lora_rank else None
        if indexer is not None and m.indexer_full[il]:
            top_k = _lightning_indexer(g, s, m, inp, indexer, cur, qr)
        cur = _mla_attention(g, s, m, inp, cur, qr, top_k if indexer is not None else None)
        if il == m.n_layer - 1:
            cur, residual = g.get_rows(cur, inp.out_ids), g.get_rows(residual, inp.out_ids)
        ffn_inp = g.same("ADD", cur, residual)
        cur = g.rms_norm(ffn_inp)
        if il < m.n_dense_lead:
            cur = dense_ffn(g, s, cur, width=m.n_ff_dense)
        else:
            cur = shared_expert(g, s, cur, moe_ffn(g, s, cur, norm_weights=m.weights_norm, route=m.route), gate="")
        x = g.same("ADD", cur, ffn_inp)
    hidden = g.rms_norm(x)
    hidden.is_output = True  # t_embd and t_h_nextn, the NextN head's input
    g.expand(g.mul_mat(g.weight(), hidden, n_vocab))
    return g


def _lightning_indexer(g: Graph, s: Shape, m: MlaShape, inp: Inputs, idx: _IndexerInputs, cur: Tensor,
                       qr: Tensor | None) -> Tensor:
    """The indexer's queries (from the Q latent) and key (layer-normed), roped and rotated; the key stored in
    its cache, the fused kernel's scores over every cell, their top k. Only the key's store is expanded here:
    the rest enters the graph through the attention mask."""
    t, heads, dim = s.n_tokens, m.indexer_heads, m.indexer_dim
    q = g.same("ROPE", g.reshape(g.mul_mat(g.weight(), qr, heads * dim), dim, heads, t), inp.positions)
    k = g.mul_mat(g.weight(), cur, dim)
    k = g.same("ADD", g.same("MUL", g.same("NORM", k), g.weight()), g.weight())  # LLM_NORM with weight and bias
    k = g.same("ROPE", g.reshape(k, dim, 1, t), inp.positions)
    q = g.mul_mat(idx.rotation, q, dim)
    k = g.mul_mat(idx.rotation, k, dim)
    cache = g.weight(dim, s.n_kv, type_size=m.k_type_size)
    g.expand(Tensor("SET_ROWS", cache.shape, (g.view(k, dim, t), idx.k_idxs, cache), view_of=cache))
    weights = g.same("SCALE", g.view(g.mul_mat(g.weight(), cur, heads), heads, t))  # over a view: its own room
    scores = g.op("LIGHTNING_INDEXER", (s.n_kv, t), g.view(q, dim, heads, t), g.view(cache, dim, 1, s.n_kv),
                  weights, idx.mask)
    return g.cont(g.op("TOP_K", (min(s.n_kv, m.indexer_top_k), t), scores, type_size=I32))


def _mla_attention(g: Graph, s: Shape, m: MlaShape, inp: Inputs, cur: Tensor, qr: Tensor | None,
                   top_k: Tensor | None) -> Tensor:
    """MLA with the absorption optimization: Q's nope part absorbed into the latent (wk_b), the rope parts
    roped, Q = [absorbed | rope] over n_head heads and K = [latent | rope] over one; K stored; with an indexer
    the mask is refilled with -inf and the top-k cells unmasked; attention over the cache (V a view of K),
    decompressed by wv_b, then the output projection."""
    t, heads, latent, rope = s.n_tokens, s.n_head, m.kv_lora_rank, m.rope_dims
    nope, width = m.k_mla - rope, latent + rope
    q = g.mul_mat(g.weight(), qr if qr is not None else cur, heads * m.k_mla)
    q_pe = g.same("ROPE", g.view(q, rope, heads, t), inp.positions)  # over a view: its own room
    kv_pe = g.mul_mat(g.weight(), cur, width)
    k_pe = g.same("ROPE", g.view(kv_pe, rope, 1, t), inp.positions)
    kv = g.reshape(g.rms_norm(g.view(kv_pe, latent, t)), latent, 1, t)
    absorbed = g.mul_mat(g.weight(), g.permute(g.view(q, nope, heads, t), nope, t, heads), latent)
    q_cur = g.op("CONCAT", (width, heads, t), g.permute(absorbed, latent, heads, t), q_pe)
    k_cur = g.op("CONCAT", (width, 1, t), kv, k_pe)
    for tensor in (q_cur, kv, k_cur):  # build_attn expands Q, V, K
        g.expand(tensor)
    kvi = inp.kv
    cache = g.weight(width, s.n_kv, type_size=m.k_type_size)
    g.expand(Tensor("SET_ROWS", cache.shape, (g.view(k_cur, width, t), kvi.k_idxs, cache), view_of=cache))
    mask = kvi.mask
    if top_k is not None:  # every cell -inf, then zeros set at the top-k rows, plus the causal mask
        filled = g.op("FILL", mask.shape, mask, type_size=mask.type_size)
        # ggml_fill over the zeros leaf runs in place (FILL is in ggml_op_can_inplace): the leaf is its room,
        # allocated with the inputs and freed after the rows are set
        zeros = g.input(1, top_k.shape[0], t)
        rows = Tensor("SET_ROWS", (1, s.n_kv, t), (zeros, g.view(top_k, *top_k.shape), g.view(filled, 1, s.n_kv, t)),
                      type_size=mask.type_size, view_of=filled)
        mask = g.op("ADD", mask.shape, g.view(rows, *mask.shape), mask, type_size=mask.type_size)
    q_view = g.permute(g.view(q_cur, width, heads, t), width, t, heads)
    k_view = g.permute(g.view(cache, width, 1, s.n_kv), width, s.n_kv, 1)
    v_view = g.permute(g.view(g.view(cache, width, 1, s.n_kv), latent, 1, s.n_kv), latent, s.n_kv, 1)
    if s.flash:
        out = g.op("FLASH_ATTN_EXT", (latent, heads, t), q_view, k_view, v_view, mask)
        out = g.mul_mat(g.weight(), g.permute(out, latent, t, heads), m.v_mla)  # wv_b: back to the heads
    else:  # KQ, its masked softmax in place, V (a view of K, not transposed) made contiguous transposed, KQV
        scores = g.same("SOFT_MAX", g.op("MUL_MAT", (s.n_kv, t, heads), k_view, q_view), mask)
        v_cont = g.op("CONT", (s.n_kv, latent, 1), g.transpose(v_view), type_size=m.k_type_size)
        out = g.mul_mat(g.weight(), g.op("MUL_MAT", (latent, t, heads), v_cont, scores), m.v_mla)
    out = g.expand(g.reshape(g.cont(g.permute(out, m.v_mla, heads, t)), m.v_mla * heads, t))
    return g.mul_mat(g.weight(), out, s.n_embd)
