"""Predicted weight bytes after re-quantization: llama.cpp's per-tensor type choice, replayed on the tensor table."""

from __future__ import annotations

from collections.abc import Iterable

from workbench.core.gguf.ggml_types import FILE_TYPE_DEFAULT_TENSOR_TYPE, canonical_quant_type, ggml_type, tensor_bytes
from workbench.core.gguf.model_info import ModelInfo, TensorInfo
from workbench.core.ledger.model_memo import by_model
from workbench.core.ledger.mtp import in_mtp_block, mtp_layers

UNQUANTIZED = frozenset({"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64"})

# Name fragments llama.cpp's quantizer never touches (llama-quant.cpp tensor_allows_quantization):
# small or precision-critical tensors it copies as they are.
_KEPT_FRAGMENTS = (
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "time_mix_first.weight",
    "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight",
    "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
    "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
    ".rel_pos", ".patch_embd", ".patch_merger",
)
_KEPT_NAMES = frozenset({"position_embd.weight", "token_types.weight"})

_IQ_LOW = frozenset({"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"})


def _n_dims(shape: tuple[int, ...]) -> int:
    """ggml_n_dims: trailing dimensions of 1 do not count."""
    dims = len(shape)
    while dims > 1 and shape[dims - 1] == 1:
        dims -= 1
    return dims


def quantizer_keeps(tensor: TensorInfo) -> bool:
    """True when llama.cpp's quantizer copies this tensor unchanged (1-D tensors, norms, ...)."""
    name = tensor.name
    if _n_dims(tensor.shape) < 2 or not name.endswith("weight") or name in _KEPT_NAMES:
        return True
    return any(fragment in name for fragment in _KEPT_FRAGMENTS)


def _category(name: str) -> str:
    """llama-quant.cpp tensor_get_category."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    # attn_qkv and attn_kv_b are attn_v-like: llama.cpp's attn_v branch catches them first
    for fragment, category in (
        ("attn_qkv.weight", "attn_v"), ("attn_kv_b.weight", "attn_v"), ("attn_v.weight", "attn_v"),
        ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"), ("attn_output.weight", "attn_output"),
        ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"), ("ffn_down", "ffn_down"),
    ):
        if fragment in name:
            return category
    return "other"


def _use_more_bits(i_layer: int, n_layer: int) -> bool:
    # C integer division; i_layer >= n_layer // 8 in the last clause, so % is never negative
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


# Fallbacks when a row is not a whole number of blocks (llama-quant.cpp tensor_type_fallback).
_FALLBACK = {
    "IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL", "IQ2_S": "IQ4_NL",
    "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q2_0": "Q4_0", "Q2_K": "Q4_0",
    "Q3_K": "Q4_0", "TQ1_0": "Q4_0", "TQ2_0": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
}


def _fit_rows(tensor: TensorInfo, type_name: str) -> str:
    if tensor.shape[0] % ggml_type(type_name).block_size == 0:
        return type_name
    fallback = _FALLBACK.get(type_name, type_name)
    return fallback if tensor.shape[0] % ggml_type(fallback).block_size == 0 else "F16"


class _QuantPlan:
    """Replays llama-quant.cpp llama_tensor_get_type_impl for dense models (counters in file order).

    Approximations, documented: the 70B attn_v bump and Falcon-specific branches are left out,
    imatrix-dependent choices assume no imatrix, and experts use the tensor's own layer number.
    """

    def __init__(self, model: ModelInfo, ftype: str) -> None:
        self.ftype = ftype
        self.default = FILE_TYPE_DEFAULT_TENSOR_TYPE[ftype]
        self.n_layer = model.n_layer
        self.n_gqa = model.n_head // model.n_head_kv if model.n_head_kv else 1
        expert_count = model.metadata.get(f"{model.architecture}.expert_count", 0)
        self.n_expert = expert_count if isinstance(expert_count, int) else 0
        names = [t.name for t in model.tensors]
        self.tied = "output.weight" not in names
        self.n_attention_wv = sum(1 for n in names if _category(n) == "attn_v")
        self.i_attention_wv = 0
        self.counters = {"ffn_down": 0, "ffn_gate": 0, "ffn_up": 0}

    def _layer(self, category: str, name: str) -> int:
        index = self.counters[category]
        self.counters[category] += 1
        if self.n_expert > 1 and name.startswith("blk."):
            return int(name.split(".")[1])
        return index

    def target(self, tensor: TensorInfo) -> str:
        if quantizer_keeps(tensor):
            return tensor.ggml_type
        if self.default in UNQUANTIZED:
            return self.default
        return _fit_rows(tensor, self._mixed(tensor))

    def _mixed(self, tensor: TensorInfo) -> str:  # noqa: C901 - mirrors llama.cpp's decision table
        ftype, category, new = self.ftype, _category(tensor.name), self.default
        if category == "output" or (self.tied and category == "token_embd"):
            if ftype == "MXFP4_MOE" or tensor.shape[0] % ggml_type(new).block_size:
                return "Q8_0"
            if ftype in _IQ_LOW or ftype == "IQ3_XXS":
                return "Q5_K"
            return new if new == "Q8_0" else "Q6_K"
        if ftype == "MXFP4_MOE":
            return "MXFP4" if len(tensor.shape) > 2 and tensor.shape[2] > 1 else "Q8_0"
        if category == "token_embd":
            if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
                return "Q2_K"
            if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
                return "IQ3_S"
            if ftype in ("TQ1_0", "TQ2_0", "Q2_0"):
                return "Q4_K"
            return new
        if ftype in _IQ_LOW:
            return self._iq_low(category, tensor.name, new)
        if category == "attn_v":
            return self._attn_v(new)
        if category == "attn_k":
            return "Q8_0" if self.n_expert == 8 else {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new)
        if category == "attn_q":
            return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new)
        if category == "ffn_down":
            return self._ffn_down(tensor.name, new)
        if category == "attn_output":
            if self.n_expert == 8:
                mixes = {"Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS"}
                return "Q5_K" if ftype in mixes else new
            return {"Q2_K": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K", "IQ3_M": "Q4_K"}.get(ftype, new)
        if category in ("ffn_gate", "ffn_up"):
            i_layer = self._layer(category, tensor.name)
            if ftype == "IQ3_XS" and self.n_layer // 8 <= i_layer < 7 * self.n_layer // 8:
                return "IQ3_XXS"
        return new

    def _attn_v(self, new: str) -> str:
        ftype, gqa4 = self.ftype, self.n_gqa >= 4
        i, n = self.i_attention_wv, self.n_attention_wv
        self.i_attention_wv += 1
        if ftype == "Q2_K":
            new = "Q4_K" if gqa4 else "Q3_K"
        elif ftype == "Q2_K_S" and gqa4:
            new = "Q4_K"
        elif ftype == "IQ3_XXS":
            new = "Q4_K" if gqa4 else "IQ3_S"
        elif ftype in ("IQ3_XS", "IQ3_S") and gqa4:
            new = "Q4_K"
        elif ftype == "IQ3_M":
            new = "Q4_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if i < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype in ("IQ4_NL", "IQ4_XS") and gqa4:
            new = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i, n):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and i < 4:
            new = "Q5_K"
        return "Q8_0" if self.n_expert == 8 else new

    def _ffn_down(self, name: str, new: str) -> str:
        ftype, n = self.ftype, self.n_layer
        i = self._layer("ffn_down", name)
        if ftype == "Q2_K":
            return "Q3_K"
        if ftype == "Q2_K_S":
            return "Q4_K" if i < n // 8 else new
        if ftype == "IQ3_XXS":
            return "Q4_K" if i < n // 8 else "Q3_K"
        if ftype == "Q3_K_M":
            return "Q5_K" if i < n // 16 else "Q4_K"
        if ftype == "IQ3_M" and (i < n // 8 or (self.n_expert == 8 and _use_more_bits(i, n))):
            return "Q4_K"
        if ftype == "Q3_K_L":
            return "Q5_K"
        if ftype == "Q4_K_M":
            return "Q6_K" if _use_more_bits(i, n) else new
        if ftype in ("IQ4_NL", "IQ4_XS") and i < n // 8:
            return "Q5_K"
        if ftype == "Q5_K_M" and _use_more_bits(i, n):
            return "Q6_K"
        if ftype == "Q4_K_S" and i < n // 8:
            return "Q5_K"
        return new

    def _iq_low(self, category: str, name: str, new: str) -> str:
        ftype = self.ftype
        if category == "attn_v":
            self.i_attention_wv += 1
            if self.n_gqa >= 4 or self.n_expert >= 4:
                return "Q4_K"
            return "IQ3_S" if ftype in ("IQ2_S", "IQ2_M") else "Q2_K"
        if self.n_expert == 8 and category == "attn_k":
            return "Q4_K"
        if category == "ffn_down":
            i = self._layer("ffn_down", name)
            if i < self.n_layer // 8:
                return "IQ3_S" if ftype in ("IQ2_S", "IQ2_M") else "Q2_K"
            return new
        if category == "attn_output":
            if self.n_expert == 8:
                return "Q5_K"
            if ftype in ("IQ1_S", "IQ1_M"):
                return "IQ2_XXS"
            if ftype in ("IQ2_S", "IQ2_M"):
                return "IQ3_S"
        return new


def planned_tensor_types(model: ModelInfo, weights: str) -> Iterable[tuple[TensorInfo, str]]:
    """Each tensor with the type llama.cpp's quantizer would give it for file type `weights`."""
    plan = _QuantPlan(model, canonical_quant_type(weights))
    for tensor in model.tensors:
        yield tensor, plan.target(tensor)


@by_model
def requantized_weights_bytes(model: ModelInfo, weights: str) -> int:
    """Bytes of all tensors after `llama-quantize` to `weights` (a QUANT_TYPES name)."""
    total = 0
    for tensor, type_name in planned_tensor_types(model, weights):
        total += tensor.n_bytes if type_name == tensor.ggml_type else tensor_bytes(type_name, tensor.shape)
    return total


def mtp_weights_bytes(model: ModelInfo, weights: str) -> int:
    """Bytes of the MTP blocks' tensors at `weights` ("keep": the file's): what llama.cpp leaves unread
    without mmap (mtp.py)."""
    if not mtp_layers(model):
        return 0
    if weights.lower() == "keep" or (model.file_type is not None and weights.upper() == model.file_type):
        return sum(t.n_bytes for t in model.tensors if in_mtp_block(model, t.name))
    return sum(t.n_bytes if kind == t.ggml_type else tensor_bytes(kind, t.shape)
               for t, kind in planned_tensor_types(model, weights) if in_mtp_block(model, t.name))
