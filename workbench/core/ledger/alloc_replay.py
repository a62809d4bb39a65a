"""A replay of llama.cpp's graph allocator over the reserve graph of a dense decoder with flash attention.

Where the logits land in the compute buffer is not a sum of live tensors: ggml-alloc places
each tensor in the smallest free block that holds it (else at the top of the buffer), so the
logits sit above whichever fragment the last layer's n_embd-wide output happened to take.
With a query wider than n_embd (Qwen3-0.6B/4B) that fragment can be the top of the last
layer's attention tensors at some contexts and the bottom of the buffer at others. This
module lays out the graph the way llama.cpp 0c1e570 does and returns where the logits start.

Sources (llama.cpp 0c1e570): ggml/src/ggml-alloc.c (ggml_gallocr_alloc_graph_impl,
ggml_gallocr_allocate_node, ggml_dyn_tallocr_alloc / _free_bytes, ggml_op_can_inplace);
ggml/src/ggml.c ggml_visit_parents_graph (node order: depth first, sources left to right);
src/llama-graph.cpp build_inp_embd, build_attn (q, v, k expanded, then the KV stores),
build_attn_mha (flash attention on permuted views), build_ffn (SwiGLU over gate, up);
src/models/llama.cpp, qwen2.cpp, qwen3.cpp (norms, RoPE, the last layer's get_rows).
The ops that only rescale a tensor (RMS norm, its weight, RoPE, biases, Q/K norms) run in
place and do not move anything, so one graph covers llama, qwen2 and qwen3.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from workbench.core.ledger.graph_alloc import Tensor, place


@dataclass(frozen=True)
class DenseDecoder:
    """The widths that size a dense decoder's reserve graph (elements per token)."""

    n_layer: int
    n_embd: int
    head_dim: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int


def _reserve_graph(model: DenseDecoder, n_kv: int, n_tokens: int) -> tuple[list[Tensor], list[Tensor], Tensor]:
    """Leafs and nodes in ggml's order, and the logits tensor, for one full ubatch."""
    leafs: list[Tensor] = []
    nodes: list[Tensor] = []
    seen: set[int] = set()

    def expand(tensor: Tensor) -> None:
        if id(tensor) in seen:
            return
        seen.add(id(tensor))
        for src in tensor.srcs:
            expand(src)
        (leafs if tensor.op == "NONE" else nodes).append(tensor)

    def weight() -> Tensor:
        return Tensor("NONE", (1,), external=True)

    def view(op: str, of: Tensor, shape: tuple[int, ...]) -> Tensor:
        return Tensor(op, shape, (of,), type_size=of.type_size, view_of=of)

    def op(name: str, shape: tuple[int, ...], *srcs: Tensor) -> Tensor:
        return Tensor(name, shape, srcs)

    def rescaled(tensor: Tensor) -> Tensor:  # RMS norm times its weight: both in place
        return op("MUL", tensor.shape, op("RMS_NORM", tensor.shape, tensor), weight())

    t, hd, n_embd = n_tokens, model.head_dim, model.n_embd
    q_width, kv_width = model.n_head * hd, model.n_head_kv * hd
    tokens = Tensor("NONE", (t,), is_input=True)
    embd_input = Tensor("NONE", (n_embd, t), is_input=True)  # the embeddings path, selected away but a leaf
    x = op("GET_ROWS", (n_embd, t), weight(), tokens)
    expand(x)
    expand(embd_input)
    positions = Tensor("NONE", (t,), is_input=True)
    k_idxs = Tensor("NONE", (t,), type_size=8, is_input=True)
    v_idxs = Tensor("NONE", (t,), type_size=8, is_input=True)
    mask = Tensor("NONE", (n_kv, t), type_size=2, is_input=True)  # f16 with flash attention
    out_ids = Tensor("NONE", (t,), is_input=True)
    for layer in range(model.n_layer):
        residual = x
        cur = rescaled(x)
        q = view("RESHAPE", op("MUL_MAT", (q_width, t), weight(), cur), (hd, model.n_head, t))
        k = view("RESHAPE", op("MUL_MAT", (kv_width, t), weight(), cur), (hd, model.n_head_kv, t))
        v = view("RESHAPE", op("MUL_MAT", (kv_width, t), weight(), cur), (hd, model.n_head_kv, t))
        q = op("ROPE", q.shape, rescaled(q), positions)  # qwen3's Q norm; llama/qwen2 rope the view itself: same place
        k = op("ROPE", k.shape, rescaled(k), positions)
        for tensor in (q, v, k):
            expand(tensor)
        k_cache, v_cache = Tensor("NONE", (kv_width, n_kv), type_size=2, external=True), \
            Tensor("NONE", (kv_width, n_kv), type_size=2, external=True)
        expand(Tensor("SET_ROWS", k_cache.shape, (k_cache, view("VIEW", k, (kv_width, t)), k_idxs), view_of=k_cache))
        expand(Tensor("SET_ROWS", v_cache.shape, (v_cache, view("VIEW", v, (kv_width, t)), v_idxs), view_of=v_cache))
        q_view = view("PERMUTE", view("VIEW", q, q.shape), (hd, t, model.n_head))
        k_view = view("PERMUTE", view("VIEW", k_cache, (hd, model.n_head_kv, n_kv)), (hd, n_kv, model.n_head_kv))
        v_view = view("PERMUTE", view("VIEW", v_cache, (hd, model.n_head_kv, n_kv)), (hd, n_kv, model.n_head_kv))
        attn = op("FLASH_ATTN_EXT", (hd, model.n_head, t), q_view, k_view, v_view, mask)
        cur = op("MUL_MAT", (n_embd, t), weight(), view("RESHAPE", attn, (q_width, t)))
        if layer == model.n_layer - 1:
            cur = op("GET_ROWS", (n_embd, t), cur, out_ids)
            residual = op("GET_ROWS", (n_embd, t), residual, out_ids)
        ffn_inp = op("ADD", (n_embd, t), cur, residual)
        cur = rescaled(ffn_inp)
        gate = op("MUL_MAT", (model.n_ff, t), weight(), cur)
        up = op("MUL_MAT", (model.n_ff, t), weight(), cur)
        down = op("MUL_MAT", (n_embd, t), weight(), op("GLU", (model.n_ff, t), gate, up))
        x = op("ADD", (n_embd, t), down, ffn_inp)
    logits = op("MUL_MAT", (model.n_vocab, t), weight(), rescaled(x))
    expand(logits)
    return leafs, nodes, logits


@lru_cache(maxsize=256)
def floats_below_logits(model: DenseDecoder, n_kv: int, n_tokens: int) -> float:
    """Where llama.cpp's allocator puts the logits, in f32 elements per ubatch token from the
    buffer's start: the compute buffer is that plus the n_vocab x n_tokens logits when they are the peak."""
    leafs, nodes, logits = _reserve_graph(model, n_kv, n_tokens)
    return place(leafs, nodes, logits)[1][id(logits)] / (4 * n_tokens)
