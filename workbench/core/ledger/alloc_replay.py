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

ALIGNMENT = 32  # TENSOR_ALIGNMENT, the CPU buffer type's alignment
_IN_PLACE = frozenset({"ADD", "MUL", "ROPE", "RMS_NORM"})  # of ggml_op_can_inplace, the ones this graph uses


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


class _Tensor:
    __slots__ = ("op", "shape", "type_size", "srcs", "view_src", "external", "is_input")

    def __init__(self, op: str, shape: tuple[int, ...], srcs: tuple[_Tensor, ...] = (), *, type_size: int = 4,
                 view_of: _Tensor | None = None, external: bool = False, is_input: bool = False) -> None:
        self.op, self.shape, self.srcs, self.type_size = op, shape, srcs, type_size
        self.view_src = (view_of.view_src or view_of) if view_of is not None else None  # ggml keeps the root
        self.external, self.is_input = external, is_input

    @property
    def n_bytes(self) -> int:
        n = self.type_size
        for d in self.shape:
            n *= d
        return n


def _padded(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


class _FreeBlocks:
    """ggml_dyn_tallocr on one chunk: free blocks sorted by offset, the last one open-ended."""

    def __init__(self) -> None:
        self.blocks: list[list[int]] = [[0, 1 << 62]]
        self.max_size = 0

    def alloc(self, size: int) -> int:
        size = _padded(size)
        best, best_size = len(self.blocks) - 1, None  # best fit besides the last block, else the last
        for i, (_, block_size) in enumerate(self.blocks[:-1]):
            if block_size >= size and (best_size is None or block_size <= best_size):
                best, best_size = i, block_size
        block = self.blocks[best]
        offset = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del self.blocks[best]
        self.max_size = max(self.max_size, offset + size)
        return offset

    def free(self, offset: int, size: int) -> None:
        size = _padded(size)
        blocks = self.blocks
        for i, block in enumerate(blocks):
            if block[0] + block[1] == offset:  # at the end of a block: grow it, maybe join the next
                block[1] += size
                if i < len(blocks) - 1 and block[0] + block[1] == blocks[i + 1][0]:
                    block[1] += blocks[i + 1][1]
                    del blocks[i + 1]
                return
            if offset + size == block[0]:  # at the start of a block: grow it, maybe join the previous
                block[0] = offset
                block[1] += size
                if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == block[0]:
                    blocks[i - 1][1] += block[1]
                    del blocks[i]
                return
        at = next((i for i, block in enumerate(blocks) if block[0] > offset), len(blocks))
        blocks.insert(at, [offset, size])


def _reserve_graph(model: DenseDecoder, n_kv: int, n_tokens: int) -> tuple[list[_Tensor], list[_Tensor], _Tensor]:
    """Leafs and nodes in ggml's order, and the logits tensor, for one full ubatch."""
    leafs: list[_Tensor] = []
    nodes: list[_Tensor] = []
    seen: set[int] = set()

    def expand(tensor: _Tensor) -> None:
        if id(tensor) in seen:
            return
        seen.add(id(tensor))
        for src in tensor.srcs:
            expand(src)
        (leafs if tensor.op == "NONE" else nodes).append(tensor)

    def weight() -> _Tensor:
        return _Tensor("NONE", (1,), external=True)

    def view(op: str, of: _Tensor, shape: tuple[int, ...]) -> _Tensor:
        return _Tensor(op, shape, (of,), type_size=of.type_size, view_of=of)

    def op(name: str, shape: tuple[int, ...], *srcs: _Tensor) -> _Tensor:
        return _Tensor(name, shape, srcs)

    def rescaled(tensor: _Tensor) -> _Tensor:  # RMS norm times its weight: both in place
        return op("MUL", tensor.shape, op("RMS_NORM", tensor.shape, tensor), weight())

    t, hd, n_embd = n_tokens, model.head_dim, model.n_embd
    q_width, kv_width = model.n_head * hd, model.n_head_kv * hd
    tokens = _Tensor("NONE", (t,), is_input=True)
    embd_input = _Tensor("NONE", (n_embd, t), is_input=True)  # the embeddings path, selected away but a leaf
    x = op("GET_ROWS", (n_embd, t), weight(), tokens)
    expand(x)
    expand(embd_input)
    positions = _Tensor("NONE", (t,), is_input=True)
    k_idxs = _Tensor("NONE", (t,), type_size=8, is_input=True)
    v_idxs = _Tensor("NONE", (t,), type_size=8, is_input=True)
    mask = _Tensor("NONE", (n_kv, t), type_size=2, is_input=True)  # f16 with flash attention
    out_ids = _Tensor("NONE", (t,), is_input=True)
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
        k_cache, v_cache = _Tensor("NONE", (kv_width, n_kv), type_size=2, external=True), \
            _Tensor("NONE", (kv_width, n_kv), type_size=2, external=True)
        expand(_Tensor("SET_ROWS", k_cache.shape, (k_cache, view("VIEW", k, (kv_width, t)), k_idxs), view_of=k_cache))
        expand(_Tensor("SET_ROWS", v_cache.shape, (v_cache, view("VIEW", v, (kv_width, t)), v_idxs), view_of=v_cache))
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


def _place(leafs: list[_Tensor], nodes: list[_Tensor], target: _Tensor) -> int:
    """ggml_gallocr_alloc_graph_impl: the offset the target tensor gets."""
    blocks = _FreeBlocks()
    children: dict[int, int] = {}
    views: dict[int, int] = {}
    offset: dict[int, int] = {}
    allocated: set[int] = set()

    def allocate(tensor: _Tensor) -> None:
        key = id(tensor)
        if tensor.external or key in allocated or key in offset or tensor.view_src is not None:
            return
        allocated.add(key)
        if tensor.op in _IN_PLACE:
            for parent in tensor.srcs:
                # ggml_gallocr_is_own: only a tensor the allocator placed itself can be reused, and a
                # view (the reshaped Q/K, say) is never placed, so RMS norm / RoPE over one get new room
                if id(parent) not in allocated or parent.shape != tensor.shape or parent.type_size != tensor.type_size:
                    continue
                if children.get(id(parent), 0) != 1 or views.get(id(parent), 0) != 0:
                    continue
                offset[key] = offset[id(parent)]
                allocated.discard(id(parent))  # the node owns the room now: the parent is not freed
                return
        offset[key] = blocks.alloc(tensor.n_bytes)

    for leaf in leafs:
        allocate(leaf)
    for node in nodes:
        if node.view_src is not None:
            views[id(node.view_src)] = views.get(id(node.view_src), 0) + 1
        for src in node.srcs:
            children[id(src)] = children.get(id(src), 0) + 1
            if src.is_input:
                allocate(src)
    for node in nodes:
        for parent in node.srcs:
            allocate(parent)
        allocate(node)
        if node is target:
            return offset[id(node)]
        for parent in node.srcs:
            children[id(parent)] -= 1
            if children[id(parent)] or views.get(id(parent), 0):
                continue
            if parent.view_src is not None:
                owner = parent.view_src
                views[id(owner)] -= 1
                if not views[id(owner)] and not children.get(id(owner), 0) and id(owner) in allocated:
                    blocks.free(offset[id(owner)], owner.n_bytes)
                    allocated.discard(id(owner))
            elif id(parent) in allocated:
                blocks.free(offset[id(parent)], parent.n_bytes)
                allocated.discard(id(parent))
    raise AssertionError("the logits are the graph's last node")


@lru_cache(maxsize=256)
def floats_below_logits(model: DenseDecoder, n_kv: int, n_tokens: int) -> float:
    """Where llama.cpp's allocator puts the logits, in f32 elements per ubatch token from the
    buffer's start: the compute buffer is that plus the n_vocab x n_tokens logits when they are the peak."""
    leafs, nodes, logits = _reserve_graph(model, n_kv, n_tokens)
    return _place(leafs, nodes, logits) / (4 * n_tokens)
