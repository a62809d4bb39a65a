"""ggml-alloc's placement of a compute graph, replayed: where each tensor lands and how high the buffer grows.

A compute buffer is not a sum of live tensors: ggml-alloc places each tensor in the smallest free
block that holds it (else at the top of the buffer) and frees it after its last use, so what sits
under the peak depends on the fragments earlier nodes left. This module lays a graph out the way
llama.cpp 0c1e570 does. Sources: ggml/src/ggml-alloc.c (ggml_gallocr_alloc_graph_impl: graph inputs
first, then per node its parents and itself, then the parents whose last use it was;
ggml_gallocr_allocate_node: in place over an own, same-layout parent with one child and no views;
ggml_dyn_tallocr_alloc / _free_bytes; ggml_op_can_inplace), ggml/src/ggml.c ggml_visit_parents_graph
(node order: depth first, sources left to right; views are nodes that own no room).
"""

from __future__ import annotations

ALIGNMENT = 32  # TENSOR_ALIGNMENT, the CPU buffer type's alignment
# ggml_op_can_inplace: the ops that may take over their parent's room (CLAMP too: llama.cpp places the
# clamped sum of the expert weights over the sum)
IN_PLACE = frozenset({"CLAMP", "SCALE", "DIAG_MASK_ZERO", "DIAG_MASK_INF", "ADD", "ADD_ID", "ADD1", "SUB", "MUL", "DIV", "SQR",
                      "SQRT", "LOG", "UNARY", "ROPE", "ROPE_BACK", "SILU_BACK", "RMS_NORM", "RMS_NORM_BACK",
                      "SOFT_MAX", "SOFT_MAX_BACK"})


class Tensor:
    """A ggml tensor as ggml-alloc sees it; the last four slots are the allocator's state while `place` runs."""

    __slots__ = ("op", "shape", "type_size", "srcs", "view_src", "external", "is_input", "is_output", "seen_by",
                 "size", "offset", "children", "views", "owned")

    def __init__(self, op: str, shape: tuple[int, ...], srcs: tuple[Tensor, ...] = (), *, type_size: float = 4,
                 view_of: Tensor | None = None, external: bool = False, is_input: bool = False) -> None:
        self.op, self.shape, self.srcs, self.type_size = op, shape, srcs, type_size
        self.view_src = (view_of.view_src or view_of) if view_of is not None else None  # ggml keeps the root
        self.external, self.is_input = external, is_input
        self.is_output = False  # ggml_set_output: never freed, never taken over in place
        self.seen_by: object = None  # the graph whose expand reached it
        self.size = -1  # padded bytes, once the allocator asks
        # offset (where it was placed, -1 before), children, views and owned (placed by the allocator and not
        # yet freed or taken over) are set by `place` before it reads them

    @property
    def n_bytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return int(n * self.type_size)


def padded(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


class FreeBlocks:
    """ggml_dyn_tallocr on one chunk: free blocks sorted by offset, the last one open-ended."""

    def __init__(self) -> None:
        self.blocks: list[list[int]] = [[0, 1 << 62]]
        self.max_size = 0

    def alloc(self, size: int) -> int:
        """`size` is padded already."""
        blocks = self.blocks
        best, best_size = len(blocks) - 1, 1 << 63  # best fit besides the last block, else the last
        for i in range(len(blocks) - 1):
            block_size = blocks[i][1]
            if size <= block_size <= best_size:
                best, best_size = i, block_size
        block = blocks[best]
        offset = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del blocks[best]
        if offset + size > self.max_size:
            self.max_size = offset + size
        return offset

    def free(self, offset: int, size: int) -> None:
        """`size` is padded already."""
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


def place(inputs: list[Tensor], nodes: list[Tensor]) -> int:
    """ggml_gallocr_alloc_graph_impl over `inputs` (in the order llama.cpp allocates them) and `nodes`: the
    buffer's peak in bytes. Each placed tensor's `offset` says where it went."""
    blocks = FreeBlocks()

    def allocate(tensor: Tensor) -> None:
        if tensor.external or tensor.offset >= 0 or tensor.view_src is not None:
            return
        if tensor.size < 0:
            tensor.size = padded(tensor.n_bytes)
        if tensor.op in IN_PLACE:
            for parent in tensor.srcs:
                # ggml_gallocr_is_own: only a tensor the allocator placed itself can be reused, and a
                # view (a reshaped Q/K, say) is never placed, so RMS norm / RoPE over one get new room
                if parent.owned and parent.children == 1 and not parent.views and not parent.is_output \
                        and parent.shape == tensor.shape and parent.type_size == tensor.type_size:
                    tensor.offset, tensor.owned = parent.offset, True
                    parent.owned = False  # the node owns the room now: the parent is not freed
                    return
        tensor.offset, tensor.owned = blocks.alloc(tensor.size), True

    def release(tensor: Tensor) -> None:
        if tensor.owned and not tensor.is_output:
            blocks.free(tensor.offset, tensor.size)
            tensor.owned = False

    for node in nodes:  # the state of an earlier layout is forgotten
        node.offset, node.owned, node.children, node.views = -1, False, 0, 0
        for src in node.srcs:
            src.offset, src.owned, src.children, src.views = -1, False, 0, 0
    for tensor in inputs:
        tensor.offset, tensor.owned = -1, False
    for tensor in inputs:
        allocate(tensor)
    for node in nodes:
        if node.view_src is not None:
            node.view_src.views += 1
        for src in node.srcs:
            src.children += 1
            if src.is_input:
                allocate(src)
    for node in nodes:
        for parent in node.srcs:
            allocate(parent)
        allocate(node)
        for parent in node.srcs:
            parent.children -= 1
            if parent.children or parent.views:
                continue
            owner = parent.view_src
            if owner is None:
                release(parent)
            else:
                owner.views -= 1
                if not owner.views and not owner.children:
                    release(owner)
    return blocks.max_size
