"""What a model's graph does per token beyond its matrix products: the nodes ggml computes one after another, and the elements its elementwise ops write."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from workbench.core.config.preset import Preset
from workbench.core.gguf.checks import MAX_LAYERS
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.graph_families import FamilyGraph, build_graph, family_graph
from workbench.core.ledger.graph_layers import Shape

# Cell counts no width of a real model has: a node with one of them in its shape works over the cached
# cells (scores, masks, the indexer's top-k), which the speed model prices as attention instead.
_CELLS, _SWA_CELLS = 7919, 7907
# Matrix products are priced by their FLOPs and flash attention by its cells.
_PRICED_ELSEWHERE = frozenset({"MUL_MAT", "MUL_MAT_ID", "FLASH_ATTN_EXT"})
_VIEWS = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})
# A recurrent scan (ggml's ssm_scan, gated_delta_net) updates every element of its state for each token it
# runs over, and writes that state once: its work is the state per token (this source of the op is the state).
_SCAN_STATES = {"SSM_SCAN": 0, "GATED_DELTA_NET": -1}


@dataclass(frozen=True)
class GraphWork:
    """A prompt's graph: the ops it computes and what each prompt token adds to its elementwise work; 0 and 0
    for a header no graph can be laid out for."""

    nodes: int  # ops ggml computes (views are free), each followed by a barrier of the threads
    # elements the elementwise ops write per prompt token, outside matrix products and the work over cached
    # cells; what follows the last layer's pick of the output rows runs for one row a prompt and is left out
    elements: int


def graph_work(model: ModelInfo, type_k: str = "f16", type_v: str = "f16") -> GraphWork:
    """The family's own graph where graph_families lays one out (without flash attention, as presets
    default), else a llama-shaped dense graph of the file's widths, for a prompt that asks for one output row."""
    family = family_graph(model, Preset(name="work", ctx_size=4096, cache_type_k=type_k, cache_type_v=type_v), 4096)
    if family is None:
        family = _dense_of(model)
        if family is None:
            return GraphWork(0, 0)
    family = replace(family, shape=replace(family.shape, n_outputs=1, n_kv=_CELLS),
                     swa_cells=_SWA_CELLS if family.swa_cells else 0)
    # What one more prompt token adds: the rows after the last layer's pick stay one however long the prompt.
    one, two = (_count(replace(family, shape=replace(family.shape, n_tokens=n)), family.architecture or "llama")
                for n in (1, 2))
    return GraphWork(nodes=one.nodes, elements=two.elements - one.elements)


def _dense_of(model: ModelInfo) -> FamilyGraph | None:
    """A llama layer stack of the file's widths: attention and a SwiGLU feed-forward as wide as its up projection."""
    n_head = model.n_head or 1
    head_dim = model.head_dim_k or model.n_embd // n_head
    if not (1 <= model.n_layer <= MAX_LAYERS and model.n_embd > 0 and head_dim > 0):
        return None
    n_ff = next((t.shape[1] for t in model.tensors if t.name.endswith("ffn_up.weight") and len(t.shape) >= 2), 0)
    shape = Shape(n_embd=model.n_embd, n_head=n_head, n_head_kv=model.n_head_kv or n_head, head_dim=head_dim,
                  n_tokens=1, n_kv=_CELLS, flash=False, n_ff=n_ff or 4 * model.n_embd)
    return FamilyGraph(shape=shape, recurrent=(False,) * model.n_layer, n_vocab=model.n_vocab, architecture="llama")


@lru_cache(maxsize=256)
def _count(family: FamilyGraph, architecture: str) -> GraphWork:
    total = nodes = 0
    for node in build_graph(family, architecture).nodes:
        if node.op in _VIEWS:
            continue
        nodes += 1
        if node.op in _PRICED_ELSEWHERE:
            continue
        if node.op in _SCAN_STATES:
            total += family.shape.n_tokens * _product(node.srcs[_SCAN_STATES[node.op]].shape) // family.shape.n_seqs
            continue
        # A store into the KV cache has the cache's shape: it writes its source's rows.
        shape = node.srcs[0].shape if node.op == "SET_ROWS" else node.shape
        if _CELLS in shape or _SWA_CELLS in shape:
            continue
        total += _product(shape)
    return GraphWork(nodes=nodes, elements=total)


def _product(shape: tuple[int, ...]) -> int:
    elements = 1
    for size in shape:
        elements *= size
    return elements
