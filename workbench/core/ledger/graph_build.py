"""A compute graph written the way llama.cpp's model builders write theirs: ggml ops with their result shapes.

Only what ggml-alloc sees matters here: each op's result shape and element size, its sources in
order, whether it is a view (no room of its own) and which tensors are graph inputs. Shapes follow
ggml/src/ggml.c (llama.cpp 0c1e570) for the ops the families' graphs use. `Graph.expand` is
ggml_build_forward_expand; the node order is ggml_visit_parents' depth-first order.
"""

from __future__ import annotations

from workbench.core.ledger.graph_alloc import Tensor, place

F32, F16, I32, I64 = 4, 2, 4, 8


class Graph:
    def __init__(self) -> None:
        self.inputs: list[Tensor] = []
        self.nodes: list[Tensor] = []
        self._weight = Tensor("NONE", (1,), external=True)

    # -- leafs ---------------------------------------------------------------------------------
    @staticmethod
    def input(*shape: int, type_size: float = F32) -> Tensor:
        """A graph input (ggml_set_input): a leaf, allocated before any node in the order the graph reaches it."""
        return Tensor("NONE", shape, type_size=type_size, is_input=True)

    def weight(self, *shape: int, type_size: float = F32) -> Tensor:
        """A model tensor or a cache: it lives in another buffer. Weights whose shape no view reads are one
        tensor: the allocator never places them."""
        if not shape and type_size == F32:
            return self._weight
        return Tensor("NONE", shape, type_size=type_size, external=True)

    def expand(self, tensor: Tensor) -> Tensor:
        """ggml_visit_parents: sources depth first, left to right, then the node; a tensor once."""
        stack: list[Tensor | None] = [tensor]
        while stack:
            node = stack.pop()
            if node is None:  # its sources are done: the node follows them
                node = stack.pop()
                if node.op != "NONE":
                    self.nodes.append(node)
                elif node.is_input:
                    self.inputs.append(node)
                continue
            if node.seen_by is self:
                continue
            node.seen_by = self
            stack.append(node)
            stack.append(None)
            stack.extend(reversed(node.srcs))
        return tensor

    def peak(self) -> int:
        return place(self.inputs, self.nodes)

    # -- views -----------------------------------------------------------------------------------
    @staticmethod
    def view(of: Tensor, *shape: int, op: str = "VIEW") -> Tensor:
        return Tensor(op, shape, (of,), type_size=of.type_size, view_of=of)

    def reshape(self, of: Tensor, *shape: int) -> Tensor:
        return self.view(of, *shape, op="RESHAPE")

    def permute(self, of: Tensor, *shape: int) -> Tensor:
        return self.view(of, *shape, op="PERMUTE")

    def transpose(self, of: Tensor) -> Tensor:
        return self.view(of, of.shape[1], of.shape[0], *of.shape[2:], op="TRANSPOSE")

    # -- ops ---------------------------------------------------------------------------------------
    @staticmethod
    def op(name: str, shape: tuple[int, ...], *srcs: Tensor, type_size: float = F32) -> Tensor:
        return Tensor(name, shape, srcs, type_size=type_size)

    def same(self, name: str, a: Tensor, *rest: Tensor) -> Tensor:
        """An op whose result has its first source's shape (add, mul, scale, norms, rope, unary ...)."""
        return self.op(name, a.shape, a, *rest)

    def mul_mat(self, w: Tensor, x: Tensor, rows: int) -> Tensor:
        return self.op("MUL_MAT", (rows, *x.shape[1:]), w, x)

    def mul_mat_id(self, w: Tensor, x: Tensor, ids: Tensor, rows: int) -> Tensor:
        return self.op("MUL_MAT_ID", (rows, ids.shape[0], x.shape[2]), w, x, ids)

    def rms_norm(self, x: Tensor) -> Tensor:
        """RMS norm times its weight (build_norm): both in place over a tensor the allocator owns."""
        return self.same("MUL", self.same("RMS_NORM", x), self.weight())

    def cont(self, x: Tensor, *shape: int) -> Tensor:
        return self.op("CONT", shape or x.shape, x)

    def get_rows(self, x: Tensor, ids: Tensor) -> Tensor:
        return self.op("GET_ROWS", (x.shape[0], *ids.shape), x, ids)

    def glu(self, a: Tensor, b: Tensor) -> Tensor:
        return self.op("GLU", a.shape, a, b)
