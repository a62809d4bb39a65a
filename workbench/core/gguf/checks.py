"""A GGUF header checked against its own tensor table: the counts and shapes llama.cpp would refuse.

Every figure the ledger multiplies by (layers, heads, head dimensions, vocabulary) comes
from the header, which costs nothing to forge: a 1 KB file can claim four billion layers.
The tensor table says what the file really holds, so each figure is compared with the
tensors it describes before anything is sized by it. The rules are llama.cpp's own
(llama-model.cpp and llama-model-loader.cpp): at most LLAMA_MAX_LAYERS layers, per-layer
arrays exactly one per layer, `token_embd` shaped {n_embd, n_vocab}, and each layer's
K/V projections shaped {n_embd, n_head_kv(il) * n_embd_head_k/v}.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.core.errors import GGUFError
from workbench.core.gguf.model_info import ModelInfo, TensorInfo

MAX_LAYERS = 512  # llama-hparams.h LLAMA_MAX_LAYERS: llama.cpp asserts block_count <= 512
MAX_U32 = 0xFFFF_FFFF  # llama.cpp reads every hyperparameter into a uint32_t
_LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.")
_PREFIXED_LAYER_TENSOR = re.compile(r"^[a-z_]+\.blk\.(\d+)\.")  # T5's enc.blk.N / dec.blk.N
# Multi-head latent attention (DeepSeek-V2/V3, Kimi K2, ...) projects Q and the output with
# head dimensions of its own; its K/V tensors have other names, so nothing here applies.
_MLA_KEYS = ("attention.kv_lora_rank", "attention.key_length_mla")

_REDOWNLOAD = ("The header contradicts the weights it describes: the file was damaged or edited. "
               "Download it again, or convert the model anew")


@dataclass(frozen=True)
class AttentionShape:
    """The hyperparameters the ledger reads, with the keys they came from (for the error line)."""

    arch: str
    n_layer: int
    n_embd: int
    n_head: int  # the largest over layers
    n_head_per_layer: tuple[int, ...]  # empty: n_head everywhere
    n_head_kv: int
    n_head_kv_per_layer: tuple[int, ...]
    head_dim_k: int
    head_dim_v: int
    head_dim_k_swa: int | None  # key_length_swa: sliding-window layers may use other head dims
    head_dim_v_swa: int | None
    key_length_given: bool
    value_length_given: bool
    head_count_kv_given: bool

    def heads(self, layer: int) -> int:
        return self.n_head_per_layer[layer] if self.n_head_per_layer else self.n_head

    def kv_heads(self, layer: int) -> int:
        return self.n_head_kv_per_layer[layer] if self.n_head_kv_per_layer else self.n_head_kv


def fail(what: str, where: str, fix: str = _REDOWNLOAD) -> GGUFError:
    return GGUFError(what, where=where, fix=fix)


def check_u32(key: str, value: int, where: str) -> None:
    """A hyperparameter llama.cpp stores in 32 bits; a larger one is a forged or broken header."""
    if value > MAX_U32:
        raise fail(f"metadata {key!r} is {value:,}, beyond the 32-bit range llama.cpp reads it into", where)


def check_layer_count(arch: str, n_layer: int, tensors: Sequence[TensorInfo], where: str, *, split_part: bool) -> None:
    """`block_count` against llama.cpp's limit and, in a whole file, against the blk.N tensors present."""
    key = f"{arch}.block_count"
    if n_layer > MAX_LAYERS:
        raise fail(f"{key} is {n_layer:,}; llama.cpp runs at most {MAX_LAYERS} layers (LLAMA_MAX_LAYERS)", where)
    if split_part or not tensors:
        return  # one part of a split model holds some layers; a vocabulary-only file holds none
    indices = _layer_indices(tensors, _LAYER_TENSOR)
    prefixed = not indices
    if prefixed:
        indices = _layer_indices(tensors, _PREFIXED_LAYER_TENSOR)
    if not indices:
        return  # no per-layer tensors named blk.N: a vocoder or projector file, not a text model
    present = max(indices) + 1
    if n_layer > present or (not prefixed and n_layer < present):
        raise fail(f"{key} is {n_layer:,} but the file holds the tensors of {present} layer"
                   f"{'s' if present != 1 else ''} (blk.0 to blk.{present - 1})", where)
    if not prefixed and len(indices) != present:
        missing = next(index for index in range(present) if index not in indices)
        raise fail(f"{key} is {n_layer} but the file has no tensors for layer {missing} (blk.{missing})", where)


def _layer_indices(tensors: Sequence[TensorInfo], pattern: re.Pattern[str]) -> set[int]:
    indices = set()
    for tensor in tensors:
        match = pattern.match(tensor.name)
        if match:
            indices.add(int(match.group(1)))
    return indices


def check_per_layer_array(key: str, value: Any, n_layer: int, where: str) -> None:
    """A per-layer array has exactly one entry per layer (llama-model-loader's get_key_or_arr)."""
    if not isinstance(value, (int, str)) and hasattr(value, "__len__") and len(value) != n_layer:
        raise fail(f"metadata {key!r} has {len(value):,} entries but the model has {n_layer} layers "
                   "(llama.cpp needs one per layer)", where)
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if not isinstance(item, int) or isinstance(item, bool) or item < 0:
            raise fail(f"metadata {key!r} should hold non-negative integers, found {item!r}", where)
        check_u32(key, item, where)


def embedding_rows(tensors: Sequence[TensorInfo]) -> int:
    """Tokens in `token_embd.weight` ({n_embd, n_vocab}), 0 without one."""
    embedding = next((t for t in tensors if t.name == "token_embd.weight"), None)
    return embedding.shape[1] if embedding is not None and len(embedding.shape) == 2 else 0


def check_vocabulary(arch: str, n_vocab: int, n_embd: int, tensors: Sequence[TensorInfo], where: str,
                     vocab_source: str) -> None:
    """`token_embd.weight` is {n_embd, n_vocab} in every llama.cpp architecture."""
    embedding = next((t for t in tensors if t.name == "token_embd.weight"), None)
    if embedding is None or len(embedding.shape) != 2:
        return
    rows, columns = embedding.shape
    if columns != n_vocab:
        raise fail(f"{vocab_source} gives {n_vocab:,} tokens but tensor token_embd.weight holds "
                   f"{columns:,} (shape {list(embedding.shape)})", where)
    if rows != n_embd and n_embd:
        raise fail(f"{arch}.embedding_length is {n_embd:,} but tensor token_embd.weight embeds tokens "
                   f"in {rows:,} values (shape {list(embedding.shape)})", where)


def check_attention(shape: AttentionShape, tensors: Sequence[TensorInfo], metadata: dict[str, Any],
                    where: str) -> None:
    """Each layer's Q/K/V/output projections against the heads and head dimensions the header claims.

    Only separate attn_q/attn_k/attn_v/attn_output weights are compared: fused QKV tensors
    and linear-attention layers (n_head_kv = 0 in a hybrid) have shapes of their own.
    """
    by_name = {t.name: t for t in tensors}
    kv_key = f"{shape.arch}.attention.head_count_kv" if shape.head_count_kv_given else f"{shape.arch}.attention.head_count"
    has_kv_heads = shape.n_head_kv > 0 or any(shape.n_head_kv_per_layer)
    if not has_kv_heads and shape.n_layer:
        for layer in range(shape.n_layer):
            for role in ("attn_k", "attn_v", "attn_qkv"):
                tensor = by_name.get(f"blk.{layer}.{role}.weight")
                if tensor is not None and len(tensor.shape) == 2:
                    raise fail(f"{kv_key} is 0 (no key/value heads) but tensor {tensor.name} projects to "
                               f"{tensor.shape[1]:,} values: llama.cpp refuses this file, and the KV cache "
                               "would be predicted as 0 bytes", where)
    mla = any(f"{shape.arch}.{key}" in metadata for key in _MLA_KEYS)
    for layer in range(shape.n_layer):
        kv_heads = shape.kv_heads(layer)
        if kv_heads == 0:
            continue  # a recurrent layer of a hybrid model: no attention, no KV cache
        heads = shape.heads(layer)
        if not mla:
            _check_columns(shape, by_name.get(f"blk.{layer}.attn_q.weight"), heads, "k", where, query=True)
        _check_columns(shape, by_name.get(f"blk.{layer}.attn_k.weight"), kv_heads, "k", where)
        _check_columns(shape, by_name.get(f"blk.{layer}.attn_v.weight"), kv_heads, "v", where)
        output = by_name.get(f"blk.{layer}.attn_output.weight")
        if not mla and output is not None and len(output.shape) == 2:
            dims = _head_dims(shape, "v")
            if all(output.shape[0] != heads * dim for dim in dims):
                raise fail(f"{_heads_text(shape, heads, 'v', layer, query=True)} = {heads * dims[0]:,} attention "
                           f"output values, but tensor {output.name} takes {output.shape[0]:,}", where)


def _head_dims(shape: AttentionShape, side: str) -> tuple[int, ...]:
    full = shape.head_dim_k if side == "k" else shape.head_dim_v
    swa = shape.head_dim_k_swa if side == "k" else shape.head_dim_v_swa
    return (full,) if swa is None or swa == full else (full, swa)


def _check_columns(shape: AttentionShape, tensor: TensorInfo | None, heads: int, side: str, where: str, *,
                   query: bool = False) -> None:
    if tensor is None or len(tensor.shape) != 2:
        return
    columns = tensor.shape[1]
    dims = _head_dims(shape, side)
    expected = {heads * dim for dim in dims}
    if query:
        expected |= {2 * value for value in expected}  # gated attention (Qwen3-Next) doubles Q
    if columns in expected:
        return
    layer = int(tensor.name.split(".")[1])
    raise fail(f"{_heads_text(shape, heads, side, layer, query=query)} = {heads * dims[0]:,} values per token, "
               f"but tensor {tensor.name} projects to {columns:,}", where)


def _heads_text(shape: AttentionShape, heads: int, side: str, layer: int, *, query: bool) -> str:
    """"llama.attention.head_count_kv = 3 x head dimension 64 (llama.attention.key_length)"."""
    arch = shape.arch
    if query or not shape.head_count_kv_given:
        count_key = f"{arch}.attention.head_count"
    else:
        count_key = f"{arch}.attention.head_count_kv"
    per_layer = shape.n_head_per_layer if count_key.endswith("head_count") else shape.n_head_kv_per_layer
    count_text = f"{count_key}[{layer}] = {heads}" if per_layer else f"{count_key} = {heads}"
    dim = shape.head_dim_k if side == "k" else shape.head_dim_v
    given = shape.key_length_given if side == "k" else shape.value_length_given
    if given:
        dim_text = f"{arch}.attention.{'key' if side == 'k' else 'value'}_length {dim}"
    elif shape.n_head and shape.n_embd % shape.n_head:
        dim_text = (f"head dimension {dim} ({arch}.embedding_length {shape.n_embd} / head_count {shape.n_head}, "
                    "rounded down as llama.cpp does: the embedding does not split into that many heads)")
    else:
        dim_text = f"head dimension {dim} ({arch}.embedding_length {shape.n_embd} / head_count {shape.n_head})"
    return f"{count_text} x {dim_text}"


def check_ledger_model(model: ModelInfo) -> None:
    """The ledger's per-layer sums, bounded again for a ModelInfo that did not come from read_gguf.

    read_gguf already refuses these; a ModelInfo built in code (or merged from split
    parts) reaches the ledger too, and a forged layer count must cost one line, not memory.
    """
    if model.n_layer > MAX_LAYERS:
        raise fail(f"{model.architecture or 'the model'}.block_count is {model.n_layer:,}; llama.cpp runs at most "
                   f"{MAX_LAYERS} layers (LLAMA_MAX_LAYERS)", model.source)
    per_layer = model.n_head_kv_per_layer
    if per_layer and len(per_layer) != model.n_layer:
        raise fail(f"{model.architecture}.attention.head_count_kv has {len(per_layer):,} entries but the model has "
                   f"{model.n_layer} layers (llama.cpp needs one per layer)", model.source)
    if not model.tensors:
        raise fail("holds no tensors: the header describes a model but the file carries no weights",
                   model.source, "This is a vocabulary-only GGUF (as llama.cpp's tests ship): give the model file itself")


def check_merged_split(model: ModelInfo) -> None:
    """A split model's parts put together: `block_count` (read from the first part) against
    the blk.N tensors of all parts, which no single part could be checked for."""
    check_layer_count(model.architecture, model.n_layer, model.tensors, model.source, split_part=False)
