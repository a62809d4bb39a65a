"""What one token costs a model, from its header: weight bytes read per decoded token and FLOPs per prompt token, by ggml type."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from workbench.core.config.preset_split import expert_on_cpu
from workbench.core.gguf.ggml_types import cache_type, tensor_bytes
from workbench.core.gguf.model_info import ModelInfo, TensorInfo
from workbench.core.ledger.experts import expert_counts
from workbench.core.ledger.graph_families import ROWS_PICKED_AFTER_LAST_LAYER
from workbench.core.ledger.graph_work import graph_work
from workbench.core.ledger.kv_layers import sliding_window
from workbench.core.ledger.mtp import block_of, in_mtp_block, mtp_layers
from workbench.core.ledger.weights import planned_tensor_types

_ROUTED = "_exps."  # routed-expert tensors (experts.py): a token reads used/total of them


@dataclass(frozen=True)
class ModelCosts:
    """The model's side of the speed model; every figure follows from the GGUF header and the preset's weights."""

    n_layer: int
    decode_bytes: tuple[tuple[str, int], ...]  # weight bytes one decoded token reads, by type (largest first)
    prefill_flops: tuple[tuple[str, int], ...]  # matrix FLOPs per prompt token, by weight type (no output layer)
    # what runs for a prompt's last token only, read once per prompt: the output layer and, where llama.cpp picks
    # the output rows after the last layer's attention, that layer's feed-forward
    output_bytes: tuple[tuple[str, int], ...]
    attn_flops_per_position: tuple[tuple[int, int], ...]  # (window or 0 = whole context, FLOPs per cached position)
    kv_bytes_per_position: tuple[tuple[int, float], ...]  # (window or 0, KV bytes one cached position holds)
    attn_layers: tuple[tuple[int, int], ...]  # (window or 0, how many layers attend over it)
    n_head: int  # query heads per layer
    head_dims: int  # head_dim_k + head_dim_v
    expert_note: str  # "" for a dense model
    decode_rows: int = 0  # weight rows one decoded token's mat-vecs compute (the used experts' only)
    prefill_elements: int = 0  # elements a prompt token's elementwise ops write (graph_work); 0 = unknown
    graph_nodes: int = 0  # ops of one token's graph (graph_work); 0 = unknown

    @property
    def decode_bytes_total(self) -> int:
        return sum(n for _, n in self.decode_bytes)

    def attn_flops(self, positions: float) -> float:
        """Attention FLOPs of one query token over `positions` cached tokens (QK^T and the V sum)."""
        return sum(per * (min(positions, window) if window else positions)
                   for window, per in self.attn_flops_per_position)

    def layer_positions(self, positions: float) -> float:
        """Cached positions summed over the layers, each sliding-window layer capped at its window."""
        return sum(n * (min(positions, window) if window else positions) for window, n in self.attn_layers)

    def score_mb(self, n_queries: int, positions: float) -> float:
        """MB of one layer's attention scores (f32, every head) for `n_queries` over `positions` cells."""
        return self.n_head * n_queries * positions * 4 / 1e6

    def kv_bytes(self, positions: float) -> float:
        """KV cache bytes one decoded token's attention reads over `positions` cached tokens."""
        return sum(per * (min(positions, window) if window else positions)
                   for window, per in self.kv_bytes_per_position)


def _planned(model: ModelInfo, weights: str) -> list[tuple[TensorInfo, str, int]]:
    """Each tensor a token computes with, its type and bytes after the preset's weights; the MTP blocks'
    tensors are mapped but never read (mtp.py)."""
    if weights.lower() == "keep" or (model.file_type is not None and weights.upper() == model.file_type):
        planned = [(t, t.ggml_type, t.n_bytes) for t in model.tensors]
    else:
        planned = [(t, kind, t.n_bytes if kind == t.ggml_type else tensor_bytes(kind, t.shape))
                   for t, kind in planned_tensor_types(model, weights)]
    return [entry for entry in planned if not in_mtp_block(model, entry[0].name)]


def model_costs(model: ModelInfo, weights: str = "keep", type_k: str = "f16", type_v: str = "f16") -> ModelCosts:
    """Bytes and FLOPs per token as llama.cpp's graph spends them.

    Decode reads every weight once per token, except the token embedding (get_rows reads one
    row of it; where the same table is also the output layer, that reads all of it as well) and
    the unused routed experts (used/total of them). A prompt multiplies every layer weight with
    every prompt token (2 FLOPs per weight), the routed experts used/total of the time; the
    output layer runs for the last token only (llama.cpp computes logits where the batch asks
    for them), and so does the last layer's feed-forward in the families whose graph picks the
    output rows before it (graph_families.ROWS_PICKED_AFTER_LAST_LAYER names the others).
    """
    experts = expert_counts(model, weights)
    used_share = (experts.used, experts.total) if experts else (1, 1)
    tied = not any(t.name == "output.weight" for t in model.tensors)
    decode: Counter[str] = Counter()
    decode_rows = 0
    for _layer, kind, n_bytes, rows in _layer_reads(model, weights, 0):
        decode[kind] += n_bytes
        decode_rows += rows
    flops: Counter[str] = Counter()
    output: Counter[str] = Counter()
    last_ffn = (f"blk.{model.n_layer - mtp_layers(model) - 1}.ffn_"
                if model.architecture not in ROWS_PICKED_AFTER_LAST_LAYER else None)
    for tensor, kind, n_bytes in _planned(model, weights):
        share = used_share if _ROUTED in tensor.name else (1, 1)
        if tensor.name == "output.weight" or (tied and tensor.name == "token_embd.weight"):
            output[kind] += n_bytes
        elif last_ffn and tensor.name.startswith(last_ffn) and len(tensor.shape) > 1:
            output[kind] += n_bytes * share[0] // share[1]
        elif tensor.name != "token_embd.weight" and len(tensor.shape) > 1:
            flops[kind] += 2 * tensor.n_elements * share[0] // share[1]
    window = sliding_window(model)
    per_layer = 2 * model.n_head * (model.head_dim_k + model.head_dim_v)
    bpe_k, bpe_v = cache_type(type_k).bytes_per_element, cache_type(type_v).bytes_per_element
    attn: Counter[int] = Counter()
    kv: Counter[int] = Counter()
    layers: Counter[int] = Counter()
    for layer in range(model.n_layer - mtp_layers(model)):  # the MTP blocks attend in the draft context only
        swa = window is not None and layer < len(window.is_swa) and window.is_swa[layer]
        key = window.n_swa if swa and window else 0
        attn[key] += per_layer
        layers[key] += 1
        kv[key] += float(model.kv_heads(layer) * (model.head_dim_k * bpe_k + model.head_dim_v * bpe_v))
    note = f"{experts.used} of {experts.total} experts per token" if experts else ""
    work = graph_work(model, type_k, type_v)
    return ModelCosts(
        n_layer=model.n_layer - mtp_layers(model),
        decode_bytes=tuple(decode.most_common()),
        prefill_flops=tuple(flops.most_common()),
        output_bytes=tuple(output.most_common()),
        attn_flops_per_position=tuple(sorted(attn.items())),
        kv_bytes_per_position=tuple(sorted(kv.items())),
        attn_layers=tuple(sorted(layers.items())),
        n_head=model.n_head,
        head_dims=model.head_dim_k + model.head_dim_v,
        expert_note=note,
        decode_rows=decode_rows,
        prefill_elements=work.elements,
        graph_nodes=work.nodes,
    )


def _layer_reads(model: ModelInfo, weights: str, n_cpu_moe: int) -> Iterator[tuple[int, str, int, int]]:
    """(layer, type, bytes, mat-vec rows) of what one decoded token reads, tensor by tensor, keyed as
    decode_bytes_by_layer keys them; a routed-expert tensor's bytes and rows are its used experts'."""
    experts = expert_counts(model, weights)
    used, total = (experts.used, experts.total) if experts else (1, 1)
    tied = not any(t.name == "output.weight" for t in model.tensors)
    for tensor, kind, n_bytes in _planned(model, weights):
        rows = tensor.shape[1] if len(tensor.shape) > 1 else 0  # a matrix's rows: ggml's ne[1]
        if tensor.name == "token_embd.weight":
            yield -2, kind, -(-n_bytes // max(rows, 1)), 0  # get_rows: one row, no mat-vec
            if tied:  # the same table is the output layer's weight: all of it is read there
                yield -1, kind, n_bytes, rows
            continue
        block = block_of(tensor.name)
        layer = -1 if block is None else block
        routed = _ROUTED in tensor.name
        if n_cpu_moe and expert_on_cpu(tensor.name, n_cpu_moe):
            layer = -2
        # A routed-expert tensor stacks its experts on ne[2]: a token multiplies the used ones.
        matrices = (used if routed else tensor.n_elements // max(tensor.shape[0] * rows, 1)) if rows else 0
        yield layer, kind, n_bytes * used // total if routed else n_bytes, rows * matrices


def decode_bytes_by_layer(model: ModelInfo, weights: str = "keep", n_cpu_moe: int = 0) -> dict[int, dict[str, int]]:
    """Weight bytes one decoded token reads, by repeating layer (blk.N) and type; -1 holds the output
    layer and the other tensors outside the layers, -2 what the host reads wherever the layers are: the
    token embedding's one row and, with n_cpu_moe (--n-cpu-moe), the routed experts of layers < n_cpu_moe."""
    out: dict[int, Counter[str]] = {}
    for layer, kind, n_bytes, _rows in _layer_reads(model, weights, n_cpu_moe):
        out.setdefault(layer, Counter())[kind] += n_bytes
    return {layer: dict(counts) for layer, counts in out.items()}


def decode_rows_by_layer(model: ModelInfo, weights: str = "keep", n_cpu_moe: int = 0) -> dict[int, int]:
    """Weight rows one decoded token's mat-vecs compute, keyed as decode_bytes_by_layer."""
    out: Counter[int] = Counter()
    for layer, _kind, _bytes, rows in _layer_reads(model, weights, n_cpu_moe):
        out[layer] += rows
    return dict(out)
