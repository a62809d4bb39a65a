"""The layer blocks of llama.cpp's reserve graphs, as ggml ops (graph_build).

Transcribed from llama.cpp 0c1e570: src/llama-graph.cpp (build_inp_*, build_attn with the
Hadamard rotation of a quantized cache, build_attn_mha with and without flash attention, build_rs,
build_moe_ffn, build_ffn) and the model files that use them. The order inputs are allocated in and every node's sources were
checked against the placement llama.cpp itself makes (each tensor's address in the compute
buffer, read through its eval callback on a reserve-shaped ubatch).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.ledger.graph_alloc import Tensor
from workbench.core.ledger.graph_build import F16, F32, I32, I64, Graph


@dataclass(frozen=True)
class Shape:
    """The widths a reserve graph is sized by (elements), for one ubatch of n_tokens over n_kv cells."""

    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_tokens: int
    n_kv: int
    n_seqs: int = 1  # sequences in the reserve ubatch (n_seq_max unless the KV cache is unified)
    n_rs: int = 1  # recurrent state cells: one per sequence (n_seq_max)
    rot_k: int = 0  # side of the Hadamard rotation of a quantized K cache, 0 without
    rot_v: int = 0
    flash: bool = True  # flash attention; without it the scores are a graph tensor and V is stored transposed
    # mixture of experts; n_expert 0: a dense SwiGLU feed-forward n_ff wide
    n_ff: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_shared: int = 0  # a shared expert's width, 0 without one
    # Mamba2 / gated delta net (d_state: key head size, ssm_groups: key heads, ssm_heads: value heads) / short conv
    d_conv: int = 0
    d_inner: int = 0
    d_state: int = 0
    ssm_heads: int = 0
    ssm_groups: int = 0
    # rows the last layer picks for the logits (inp_out_ids); 0: every token, as in a reserve graph. A prompt
    # asks for its last token's only: llama.cpp runs what follows the pick (most families' last feed-forward) once
    n_outputs: int = 0


@dataclass(frozen=True)
class Route:
    """How build_moe_ffn picks experts beyond a softmax top-k (DeepSeek-V3 and the files after it)."""

    sigmoid: bool = False  # expert_gating_func SIGMOID
    selection_bias: bool = False  # exp_probs_b: added to the scores the experts are chosen by
    n_groups: int = 0  # expert_group_count: experts chosen from the best n_groups_used groups only
    n_groups_used: int = 0
    scale: bool = False  # expert_weights_scale other than 0 and 1


@dataclass(frozen=True)
class KvInputs:
    """One KV cache's inputs (llm_graph_input_attn_kv; a sliding-window model has two sets)."""

    n_kv: int
    k_idxs: Tensor
    v_idxs: Tensor
    mask: Tensor
    k_rot: Tensor | None = None
    v_rot: Tensor | None = None


@dataclass
class Inputs:
    tokens: Tensor
    embd: Tensor  # build_inp_embd's embeddings input: selected away, but allocated right after the tokens and kept
    positions: Tensor
    out_ids: Tensor
    kv: KvInputs | None = None
    kv_swa: KvInputs | None = None
    s_copy_main: Tensor | None = None  # views of the recurrent states' copy indices: this ubatch's sequences
    s_copy_extra: Tensor | None = None  # and the other cells


def hadamard_side(head_dim: int, quantized: bool, *, value: bool) -> int:
    """llama-kv-cache.cpp: a quantized cache whose head size is a multiple of 64 is stored rotated, K by the
    largest power of two dividing the head size, V by 64-wide blocks; 0 where nothing is rotated."""
    if not quantized or head_dim % 64:
        return 0
    if value:
        return 64
    side = 64
    while head_dim % (side * 2) == 0:
        side *= 2
    return side


def _kv_inputs(g: Graph, s: Shape, n_kv: int) -> KvInputs:
    t = s.n_tokens
    v_rows = t if s.flash else t * s.n_head_kv * s.head_dim  # a transposed V is stored one value per row
    return KvInputs(n_kv=n_kv, k_idxs=g.input(t, type_size=I64), v_idxs=g.input(v_rows, type_size=I64),
                    mask=g.input(n_kv, t, type_size=F16 if s.flash else F32),  # f16 with flash attention
                    k_rot=g.input(s.rot_k, s.rot_k) if s.rot_k else None,
                    v_rot=g.input(s.rot_v, s.rot_v) if s.rot_v else None)


def declare_inputs(g: Graph, s: Shape, *, recurrent: bool = False, swa_cells: int = 0) -> Inputs:
    """The graph inputs; ggml-alloc places them before any node in the order the graph first reaches them."""
    t = s.n_tokens
    inp = Inputs(tokens=g.input(t, type_size=I32), embd=g.input(s.n_embd, t), positions=g.input(t, type_size=I32),
                 out_ids=g.input(s.n_outputs or t, type_size=I32), kv=_kv_inputs(g, s, s.n_kv),
                 kv_swa=_kv_inputs(g, s, swa_cells) if swa_cells else None)
    if recurrent:
        s_copy = g.input(s.n_rs, type_size=I32)
        inp.s_copy_main, inp.s_copy_extra = g.view(s_copy, s.n_seqs), g.view(s_copy, s.n_rs - s.n_seqs)
    return inp


def embeddings(g: Graph, s: Shape, inp: Inputs, n_vocab: int, *, scaled: bool = False) -> Tensor:
    """build_inp_embd: the token rows of the embedding matrix (scaled where the family scales them), then the
    embeddings input, both in the graph before anything else."""
    x = g.get_rows(g.weight(s.n_embd, n_vocab), inp.tokens)
    x = g.expand(g.same("SCALE", x) if scaled else x)
    g.expand(inp.embd)
    return x


def _rotated(g: Graph, x: Tensor, rotation: Tensor | None, side: int) -> Tensor:
    """llama_mul_mat_hadamard: x reshaped to side-long rows, times the rotation, reshaped back."""
    if rotation is None:
        return x
    n = 1
    for d in x.shape:
        n *= d
    return g.reshape(g.mul_mat(rotation, g.reshape(x, side, n // side), side), *x.shape)


def attention(g: Graph, s: Shape, inp: Inputs, cur: Tensor, *, qk_norm: bool | str = False, q_gate: bool = False,
              swa: bool = False, q_scale: bool = False, bias: bool = False, out_bias: bool = True) -> Tensor:
    """build_attn over a KV cache: Q, V, K (normed where the family norms them, roped, rotated for a quantized
    cache), their stores into the cache, the flash-attention kernel or the scores, their masked softmax and
    their product with V (the heads' output expanded), a sigmoid gate from the second half of Q (qwen3next) and the output projection. A layer of a
    model with a sliding window reads the window cache (swa) and goes through the iswa build_attn, which
    expands Q, K, V in that order; the single-cache build_attn expands Q, V, K."""
    t, hd = s.n_tokens, s.head_dim
    kv_width = s.n_head_kv * hd
    kvi = inp.kv_swa if swa else inp.kv

    def normed(x: Tensor) -> Tensor:
        return g.rms_norm(x) if qk_norm is True else x

    def full_normed(x: Tensor) -> Tensor:  # olmoe: Q and K normed over their whole width, before the heads split
        return g.rms_norm(x) if qk_norm == "full" else x

    def projected(x: Tensor, rows: int, biased: bool = True) -> Tensor:  # plus its bias where the family has one
        out = g.mul_mat(g.weight(), x, rows)
        return g.same("ADD", out, g.weight()) if bias and biased else out

    q_full = g.reshape(full_normed(projected(cur, (2 if q_gate else 1) * s.n_head * hd)), (2 if q_gate else 1) * hd,
                       s.n_head, t)
    q = g.view(q_full, hd, s.n_head, t) if q_gate else q_full
    q = g.same("ROPE", normed(q), inp.positions)
    q = _rotated(g, g.same("SCALE", q) if q_scale else q, kvi.k_rot, s.rot_k)
    v = _rotated(g, g.reshape(projected(cur, kv_width), hd, s.n_head_kv, t), kvi.v_rot, s.rot_v)
    k = g.reshape(full_normed(projected(cur, kv_width)), hd, s.n_head_kv, t)
    k = _rotated(g, g.same("ROPE", normed(k), inp.positions), kvi.k_rot, s.rot_k)
    for tensor in (q, k, v) if swa or inp.kv_swa else (q, v, k):
        g.expand(tensor)
    n_kv = kvi.n_kv
    k_cache = g.weight(kv_width, n_kv)
    g.expand(Tensor("SET_ROWS", k_cache.shape, (g.view(k, kv_width, t), kvi.k_idxs, k_cache), view_of=k_cache))
    v_cache = g.weight(kv_width, n_kv)
    if s.flash:
        v_store = (g.view(v, kv_width, t), kvi.v_idxs, v_cache)
    else:  # cpy_v of a transposed V: one value per row
        v_store = (g.reshape(g.reshape(v, kv_width, t), 1, kv_width * t), kvi.v_idxs, g.reshape(v_cache, 1, kv_width * n_kv))
    g.expand(Tensor("SET_ROWS", v_cache.shape, v_store, view_of=v_cache))
    if s.flash:
        q_view = g.permute(g.view(q, *q.shape), hd, t, s.n_head)
        k_view = g.permute(g.view(k_cache, hd, s.n_head_kv, n_kv), hd, n_kv, s.n_head_kv)
        v_view = g.permute(g.view(v_cache, hd, s.n_head_kv, n_kv), hd, n_kv, s.n_head_kv)
        out = g.op("FLASH_ATTN_EXT", (hd, s.n_head, t), q_view, k_view, v_view, kvi.mask)
        out = g.reshape(out, hd * s.n_head, t)
    else:  # build_attn_mha without flash: KQ, its masked softmax in place, KQV, heads back together
        v_view = g.permute(g.view(v_cache, n_kv, 1, hd), n_kv, hd, s.n_head_kv)
        k_view = g.permute(g.view(k_cache, hd, s.n_head_kv, n_kv), hd, n_kv, s.n_head_kv)
        q_view = g.permute(g.view(q, *q.shape), hd, t, s.n_head)
        scores = g.same("SOFT_MAX", g.op("MUL_MAT", (n_kv, t, s.n_head), k_view, q_view), kvi.mask)
        kqv = g.op("MUL_MAT", (hd, t, s.n_head), v_view, scores)
        out = g.cont(g.permute(kqv, hd, s.n_head, t), hd * s.n_head, t)
    out = _rotated(g, g.expand(out), kvi.v_rot, s.rot_v)
    if q_gate:
        out = g.same("MUL", out, g.same("UNARY", g.cont(g.view(q_full, hd, s.n_head, t), hd * s.n_head, t)))
    return projected(out, s.n_embd, out_bias)


def moe_ffn(g: Graph, s: Shape, cur: Tensor, *, norm_weights: bool = False, softmax_after: bool = False,
            bias: bool = False, route: Route | None = None) -> Tensor:
    """build_moe_ffn: the router (softmax over all experts, or for gpt-oss's SOFTMAX_WEIGHT gating over the
    chosen ones' logits; `route` for DeepSeek's sigmoid, selection bias and expert groups), the top-k experts'
    weights (normalized to sum 1 where the family asks, then scaled), gate and up of each chosen expert (with
    per-expert biases: ADD_ID), their GLU, down, weighted and summed."""
    t, used, r = s.n_tokens, s.n_expert_used, route or Route()
    logits = g.mul_mat(g.weight(), cur, s.n_expert)
    probs = g.same("ADD", logits, g.weight()) if softmax_after else g.same("UNARY" if r.sigmoid else "SOFT_MAX", logits)
    selection = g.same("ADD", probs, g.weight()) if r.selection_bias else probs  # probs stay unbiased for weights
    if r.n_groups > 1:
        selection = _groups_masked(g, s, selection, r)
    top_k = g.view(g.op("ARGSORT", selection.shape, selection, type_size=I32), used, t)
    weights = g.get_rows(g.reshape(probs, 1, s.n_expert, t), top_k)
    if softmax_after:
        weights = g.reshape(g.same("SOFT_MAX", g.reshape(weights, used, t)), 1, used, t)
    if norm_weights:
        flat = g.reshape(weights, used, t)
        total = g.op("CLAMP", (1, t), g.op("SUM_ROWS", (1, t), flat))
        weights = g.reshape(g.same("DIV", flat, total), 1, used, t)
    if r.scale:
        weights = g.same("SCALE", weights)
    g.expand(weights)  # build_moe_ffn expands the weights early
    x = g.reshape(cur, s.n_embd, 1, t)

    def expert_mm(x: Tensor, rows: int) -> Tensor:
        out = g.mul_mat_id(g.weight(), x, top_k, rows)
        return g.same("ADD_ID", out, g.weight(), top_k) if bias else out

    gate = expert_mm(x, s.n_ff)
    up = expert_mm(x, s.n_ff)
    experts = g.same("MUL", expert_mm(g.glu(gate, up), s.n_embd), weights)
    out = g.view(experts, s.n_embd, t)
    for _ in range(1, used):
        out = g.same("ADD", out, g.view(experts, s.n_embd, t))
    return g.expand(out if used > 1 else g.cont(out))  # so is its sum, before the next layer's state reads


def _groups_masked(g: Graph, s: Shape, selection: Tensor, r: Route) -> Tensor:
    """DeepSeek-V3's group-limited routing: each group scored by its two best experts, the best n_group_used kept
    (their rows gathered, set into a copy of the scores filled with -inf)."""
    t, per = s.n_tokens, s.n_expert // r.n_groups
    groups = g.reshape(selection, per, r.n_groups, t)
    best_two = g.view(g.op("ARGSORT", groups.shape, groups, type_size=I32), 2, r.n_groups, t)
    scores = g.get_rows(g.reshape(groups, 1, per, r.n_groups, t), best_two)
    scores = g.reshape(g.op("SUM_ROWS", (1, r.n_groups, t), g.reshape(scores, 2, r.n_groups, t)), r.n_groups, t)
    kept = g.view(g.op("ARGSORT", scores.shape, scores, type_size=I32), r.n_groups_used, t)
    rows = g.get_rows(groups, kept)
    filled = g.op("FILL", groups.shape, groups)
    masked = Tensor("SET_ROWS", groups.shape, (rows, kept, filled), view_of=filled)
    return g.reshape(masked, s.n_expert, t)


def shared_expert(g: Graph, s: Shape, cur: Tensor, routed: Tensor, *, gate: str = "sigmoid") -> Tensor:
    """A dense SwiGLU expert over the same input, added to the routed sum; gated by a sigmoid (qwen3next), by
    silu(x) / x (qwen2moe's sigmoid) or not at all (granitehybrid: gate "")."""
    shared = dense_ffn(g, s, cur, width=s.n_ff_shared)
    if gate:
        logit = g.mul_mat(g.weight(), cur, 1)
        factor = g.same("UNARY", logit)
        shared = g.same("MUL", shared, g.same("DIV", factor, logit) if gate == "silu_div" else factor)
    return g.same("ADD", routed, shared)


def dense_ffn(g: Graph, s: Shape, cur: Tensor, *, width: int = 0) -> Tensor:
    """build_ffn, SwiGLU: gate and up, their product, down."""
    gate = g.mul_mat(g.weight(), cur, width or s.n_ff)
    up = g.mul_mat(g.weight(), cur, width or s.n_ff)
    return g.mul_mat(g.weight(), g.glu(gate, up), s.n_embd)
