"""The CPU backend's extra CPU_REPACK weight buffer: the weights ggml-cpu re-lays out for its matrix kernels."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.config.cpu_features import CpuFeatures, host_cpu_features
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.gguf.ggml_types import tensor_bytes
from workbench.core.gguf.model_info import ModelInfo, TensorInfo
from workbench.core.ledger.model_memo import by_model
from workbench.core.ledger.weights import planned_tensor_types

TENSOR_ALIGNMENT = 32  # the repack buffer type's alignment (repack.cpp): each tensor starts on it

# ggml_repack_get_optimal_repack_type (ggml/src/ggml-cpu/repack.cpp, llama.cpp 0c1e570): per
# tensor type, the (features, rows multiple) pairs that give it a repacked layout, in the
# order the function tries them. A weight is repacked when one pair's features are all
# present and its row count (ne[1]) is a multiple. RISC-V vector and Arm SVE-256 layouts
# are left out (no board profile of the workbench has them).
REPACK_RULES: dict[str, tuple[tuple[frozenset[str], int], ...]] = {
    "Q4_0": ((frozenset({"avx2"}), 8), (frozenset({"neon", "i8mm"}), 4), (frozenset({"neon", "dotprod"}), 4)),
    "Q4_K": ((frozenset({"avx2"}), 8), (frozenset({"neon", "i8mm"}), 8), (frozenset({"neon", "dotprod"}), 8)),
    "Q2_K": ((frozenset({"avx512"}), 8),),
    "Q5_K": ((frozenset({"neon", "i8mm"}), 8), (frozenset({"neon", "dotprod"}), 8)),
    "Q6_K": ((frozenset({"neon", "i8mm"}), 8), (frozenset({"neon", "dotprod"}), 8)),
    "IQ4_NL": ((frozenset({"avx2"}), 8), (frozenset({"neon", "dotprod"}), 4)),
    "MXFP4": ((frozenset({"avx2"}), 8), (frozenset({"neon", "dotprod"}), 4)),
    "Q8_0": ((frozenset({"neon", "i8mm"}), 4), (frozenset({"neon", "dotprod"}), 4)),
    "Q1_0": ((frozenset({"neon", "i8mm"}), 4), (frozenset({"neon", "dotprod"}), 4)),
}

# Weights read with GGML_OP_GET_ROWS (llama-arch.cpp LLM_TENSOR_INFOS): never repacked, the repack
# buffer supports only MUL_MAT on 2-D and MUL_MAT_ID on 3-D weights (extra_buffer_type::supports_op).
_LOOKUP_TENSORS = frozenset({"token_embd.weight", "per_layer_token_embd.weight", "token_types.weight",
                             "position_embd.weight"})


@dataclass(frozen=True)
class RepackBuffer:
    n_bytes: int
    n_tensors: int
    types: tuple[str, ...]  # the tensor types repacked, e.g. ("MXFP4",)
    source: str


def _n_dims(shape: tuple[int, ...]) -> int:
    dims = len(shape)
    while dims > 1 and shape[dims - 1] == 1:
        dims -= 1
    return dims


def repacked(type_name: str, shape: tuple[int, ...], features: CpuFeatures) -> bool:
    """Whether ggml-cpu has a repacked layout for a weight of this type and shape on these features."""
    rows = shape[1] if len(shape) > 1 else 1
    for needed, multiple in REPACK_RULES.get(type_name, ()):
        if needed <= features.features:
            return rows % multiple == 0  # the first layout whose features match decides, as in repack.cpp
    return False


def _matmul_weight(tensor: TensorInfo) -> bool:
    dims = _n_dims(tensor.shape)
    if not tensor.name.endswith(".weight") or tensor.name in _LOOKUP_TENSORS:
        return False
    return dims == 3 if tensor.name.endswith("_exps.weight") else dims == 2


@by_model
def predicted_repack(model: ModelInfo, weights: str, features: CpuFeatures) -> RepackBuffer:
    """The CPU_REPACK buffer llama.cpp allocates for `model` loaded with `weights` on a CPU with `features`.

    With tied embeddings llama.cpp loads token_embd a second time as the output matrix (a
    MUL_MAT weight), so that copy is repacked when its type is.
    """
    names = {tensor.name for tensor in model.tensors}
    keep = weights.lower() == "keep" or (model.file_type is not None and weights.upper() == model.file_type)
    planned = ((tensor, tensor.ggml_type) for tensor in model.tensors) if keep else planned_tensor_types(model, weights)
    total, count, types = 0, 0, set()
    for tensor, type_name in planned:
        output_copy = tensor.name == "token_embd.weight" and "output.weight" not in names
        if not (_matmul_weight(tensor) or output_copy) or not repacked(type_name, tensor.shape, features):
            continue
        n_bytes = tensor.n_bytes if type_name == tensor.ggml_type else tensor_bytes(type_name, tensor.shape)
        total += -(-n_bytes // TENSOR_ALIGNMENT) * TENSOR_ALIGNMENT
        count += 1
        types.add(type_name)
    have = ", ".join(sorted(features.features)) or "none known"
    if count:
        source = (f"ggml-cpu repack.cpp: {count} {'/'.join(sorted(types))} weights re-laid out for this CPU "
                  f"(features: {have}; {features.source})")
    else:
        source = f"ggml-cpu repack.cpp: no weight of this file has a repacked layout on this CPU (features: {have}; {features.source})"
    return RepackBuffer(n_bytes=total, n_tensors=count, types=tuple(sorted(types)), source=source)


def device_cpu_features(device: DeviceProfile) -> CpuFeatures:
    """A board profile's stated features, else this machine's (the profile names none)."""
    if device.cpu_features is not None:
        where = device.source or device.name
        return CpuFeatures(frozenset(device.cpu_features), f"cpu_features of the {device.name} profile, {where}")
    host = host_cpu_features()
    return CpuFeatures(host.features, f"{host.source}; the {device.name} profile names no cpu_features")


def preset_repack(model: ModelInfo, preset: Preset, device: DeviceProfile) -> RepackBuffer:
    """predicted_repack for the preset's weights on the device's CPU.

    With layers offloaded to a GPU only the CPU's weights are repacked: the figure is then
    the all-on-CPU bound, and its source says so.
    """
    repack = predicted_repack(model, preset.weights, device_cpu_features(device))
    if preset.gpu_layers and device.accelerator != "none" and repack.n_bytes:
        return RepackBuffer(repack.n_bytes, repack.n_tensors, repack.types,
                            repack.source + "; an upper bound: offloaded layers' weights are not repacked")
    return repack
