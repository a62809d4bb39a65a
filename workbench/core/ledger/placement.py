"""The ledger per device: where llama.cpp puts each layer, and what every device then holds.

One implementation for local GPUs and RPC nodes: llama.cpp places both the same way
(src/llama-model.cpp, llama_model_base::load_tensors, llama.cpp 0c1e570 as vendored by
llama-cpp-python 0.3.36):

- the model has n_layer repeating layers plus the output layer (index n_layer);
- with n_gpu_layers = g, layers from i_gpu_start = max(n_layer + 1 - g, 0) go to the
  devices (RPC nodes first, then local GPUs), the rest stay on the host CPU;
- device of layer il = upper_bound(splits, (il - i_gpu_start) / act_gpu_layers), where
  splits are the cumulative, normalised tensor_split proportions (float32), or each
  device's free memory when tensor_split is empty or all zero;
- the input layer (token embeddings) always stays on the CPU; a model without its own
  output.weight reuses token_embd as the output, duplicated onto the output layer's device;
- each layer's KV cache lives with its layer (offload_kqv, llama-kv-cache.cpp);
- n_cpu_moe = N (--n-cpu-moe) keeps the routed experts of layers 0..N-1 in host memory wherever
  their layer goes (tensor_buft_overrides to the CPU buffer type; with mmap a view of the file).

Buffer sizes: a device buffer holds its tensors each padded to the device's alignment
(ggml_backend_alloc_ctx_tensors_from_buft); the host's weights with mmap are a view of
the file from the first to the last byte of its tensors (llama_model_loader::
get_mapping_range), so tensors of offloaded layers lying between them count there too.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from math import ceil

from workbench.core.config.preset import Preset
from workbench.core.config.preset_split import effective_gpu_layers, expert_on_cpu
from workbench.core.gguf.ggml_types import tensor_bytes
from workbench.core.gguf.model_info import ModelInfo, TensorInfo
from workbench.core.ledger.compute import feed_forward_length
from workbench.core.ledger.kv_layers import predicted_kv_layers, preset_n_ubatch
from workbench.core.ledger.split_types import CPU_ALIGNMENT, SplitDevice
from workbench.core.ledger.weights import planned_tensor_types

GGUF_ALIGNMENT = 32


_INPUT_TENSORS = ("token_embd.", "token_types.", "position_embd.", "per_layer_token_embd.", "token_embd_norm.")


def _f32(value: float) -> float:
    """`value` rounded to a C float, as llama.cpp computes its split points."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def layer_devices(n_layer: int, n_gpu_layers: int, splits: Sequence[float]) -> tuple[int, ...]:
    """Device index (into `splits`' devices) or -1 (the CPU) of layers 0..n_layer (n_layer = output)."""
    n_devices = len(splits)
    n_gpu = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
    i_gpu_start = max(n_layer + 1 - n_gpu, 0)
    act = min(n_gpu, n_layer + 1) if n_devices else 0
    cumulative, total = [], _f32(0.0)
    for value in splits:
        total = _f32(total + _f32(value))
        cumulative.append(total)
    cumulative = [_f32(value / total) if total else 0.0 for value in cumulative]
    out = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act:
            out.append(-1)
            continue
        point = _f32(_f32(il - i_gpu_start) / act)
        index = next((i for i, edge in enumerate(cumulative) if edge > point), n_devices)
        out.append(min(index, n_devices - 1))  # llama.cpp's devices.at() would throw past the end
    return tuple(out)


def _tensor_layer(name: str, n_layer: int) -> int | None:
    """Layer of a tensor: its block number, n_layer for the output layer, None for the input layer."""
    if name.startswith("blk."):
        number = name.split(".", 2)[1]
        if number.isdigit() and int(number) < n_layer:
            return int(number)
    if name.startswith(_INPUT_TENSORS):
        return None
    return n_layer


def _padded(n_bytes: int, alignment: int) -> int:
    return -(-n_bytes // alignment) * alignment


def _planned_tensors(model: ModelInfo, weights: str) -> list[tuple[TensorInfo, int, int]]:
    """(tensor, bytes, offset from the data start) of the file llama.cpp will open."""
    if weights.lower() == "keep" or (model.file_type is not None and weights.upper() == model.file_type):
        start = min((t.offset for t in model.tensors), default=0)
        return [(t, t.n_bytes, t.offset - start) for t in model.tensors]
    out, offset = [], 0
    for tensor, type_name in planned_tensor_types(model, weights):  # llama-quantize keeps the order
        n_bytes = tensor.n_bytes if type_name == tensor.ggml_type else tensor_bytes(type_name, tensor.shape)
        out.append((tensor, n_bytes, offset))
        offset += _padded(n_bytes, GGUF_ALIGNMENT)
    return out


def weights_per_device(model: ModelInfo, preset: Preset, placement: Sequence[int],
                       devices: Sequence[SplitDevice]) -> list[int]:
    """Model buffer bytes of [CPU, device 0, device 1, ...] for a placement from layer_devices."""
    n_layer = model.n_layer
    tensors = _planned_tensors(model, preset.weights)
    tied = not any(tensor.name == "output.weight" for tensor, _, _ in tensors)
    per_device = [0] * (len(devices) + 1)
    host_ranges: list[tuple[int, int]] = []
    for tensor, n_bytes, offset in tensors:
        layer = _tensor_layer(tensor.name, n_layer)
        device = -1 if layer is None else placement[layer]
        if preset.n_cpu_moe and expert_on_cpu(tensor.name, preset.n_cpu_moe):
            device = -1  # --n-cpu-moe: this layer's routed experts stay in host memory
        if device < 0:
            host_ranges.append((offset, offset + n_bytes))
            per_device[0] += _padded(n_bytes, CPU_ALIGNMENT)
        else:
            per_device[device + 1] += _padded(n_bytes, devices[device].alignment)
        if tied and tensor.name == "token_embd.weight" and placement[n_layer] >= 0:
            output_device = placement[n_layer]
            per_device[output_device + 1] += _padded(n_bytes, devices[output_device].alignment)
    if preset.mmap and host_ranges:
        # The host's weights stay in the mapped file: one view from its first to its last byte.
        per_device[0] = max(end for _, end in host_ranges) - min(start for start, _ in host_ranges)
    return per_device


def kv_per_device(model: ModelInfo, preset: Preset, n_ctx: int, placement: Sequence[int], n_devices: int) -> list[int]:
    out = [0] * (n_devices + 1)
    layers = predicted_kv_layers(model, n_ctx, preset.cache_type_k, preset.cache_type_v,
                                 n_ubatch=preset_n_ubatch(preset, n_ctx), swa_full=preset.swa_full,
                                 flash_attn=preset.flash_attn)
    for layer in layers:
        out[placement[layer.layer] + 1] += layer.n_bytes
    return out


def compute_per_device(model: ModelInfo, preset: Preset, n_ctx: int, placement: Sequence[int],
                       n_devices: int, *, pipeline: bool = False) -> list[int]:
    """Each device's compute buffer: its share of llama.cpp's worst-case ubatch graph, in units of
    n_ubatch x 4 bytes (one f32 per token).

    The stages are ledger._compute_peak's: attention (n_head x n_ctx scores without flash
    attention) and the feed-forward, each with the mask (n_ctx f32, or n_ctx/2 as f16 with flash
    attention). A device's share was measured against llama.cpp 0c1e570's own report with the
    bundled model on 1 and 2 local RPC nodes (n_ctx 1024/2048, n_ubatch 128-512, flash attention
    on and off; benchmarks/ledger_accuracy.py for the CPU-only case):

    - the host running layers: the peak stage (the logits too when it holds the output layer);
    - a device running layers without the output: the peak stage less one n_embd (two with
      flash attention): its input arrives as a copy, not a get_rows result;
    - the device holding the output: n_vocab (the logits) + 1.5 n_embd (measured n_vocab + 1 or + 2
      n_embd depending on the layers it holds; up to + 4.9 n_embd with flash attention), or its
      layers' stage if larger;
    - the host without layers: the mask, the K/V width without flash attention, and 2 n_embd;
    - pipeline parallelism (several devices, every layer offloaded: llama-context.cpp) keeps
      4 copies of the graph inputs (GGML_SCHED_MAX_COPIES): the host then holds 4 x (mask +
      K/V width) + 5 n_embd, the output device the same on top of the logits, the others
      3 more masks and 5 n_embd (3 with flash attention) on top of their stage.

    The logits' neighbours vary with n_ctx (the ledger's note on _compute_peak): the output
    device has been within 3% of llama.cpp, the others within 1%.
    """
    n_tokens = preset_n_ubatch(preset, n_ctx)
    n_embd, n_head, n_head_kv = model.n_embd, model.n_head, model.n_head_kv
    kv_width = n_head_kv * (model.head_dim_k + model.head_dim_v)
    qkv = 5 * n_embd + kv_width
    fa = preset.flash_attn
    mask = n_ctx / 2 if fa else n_ctx
    attention = mask + qkv if fa else n_ctx * n_head + mask + qkv
    feed_forward = 3 * feed_forward_length(model) + mask + 4 * n_embd
    stage = max(attention, feed_forward)
    inputs = mask + (0 if fa else kv_width)  # what each copy of the graph inputs holds
    out = []
    for device in range(-1, n_devices):
        holds_layers = any(where == device for where in placement[:-1])
        holds_output = placement[-1] == device
        if device == -1:
            if holds_layers or holds_output:
                units = max(stage, model.n_vocab + (2.5 if fa else 3) * n_embd) if holds_output else stage
            else:
                units = 4 * inputs + 5 * n_embd if pipeline else inputs + 2 * n_embd
        elif holds_output:
            units = max(model.n_vocab + (4 * inputs + 5 * n_embd if pipeline else 1.5 * n_embd),
                        stage - n_embd if holds_layers else 0)
        elif holds_layers:
            units = stage - (2 if fa else 1) * n_embd
            if pipeline:
                units += (2 if fa else 1) * n_embd + 3 * mask + (3 if fa else 5) * n_embd
        else:
            units = 0
        out.append(ceil(units * 4 * n_tokens))
    return out


def split_points(devices: Sequence[SplitDevice], preset: Preset) -> tuple[tuple[float, ...], str]:
    """The proportions llama.cpp splits by: tensor_split, else each device's free memory."""
    if preset.tensor_split and any(preset.tensor_split):
        values = list(preset.tensor_split[: len(devices)]) + [0.0] * max(0, len(devices) - len(preset.tensor_split))
        return tuple(values), "tensor_split"
    if all(device.free_bytes for device in devices):
        return tuple(float(device.free_bytes or 0) for device in devices), "free memory the devices report"
    return tuple(1.0 for _ in devices), "equal shares (a device's free memory is unknown)"


def uses_pipeline(model: ModelInfo, preset: Preset, n_devices: int) -> bool:
    """llama-context.cpp: several devices, every layer and the output offloaded, split by layer."""
    n_gpu_layers = effective_gpu_layers(preset)
    offloads_all = n_gpu_layers < 0 or n_gpu_layers > model.n_layer
    return n_devices > 1 and offloads_all and preset.split_mode == "layer"


def placement_of(n_layer: int, act: int, counts: Sequence[int]) -> tuple[int, ...]:
    """Slots from n_layer + 1 - act on, handed to the devices in order, `counts[k]` each (the rest on the CPU)."""
    out = [-1] * (n_layer + 1)
    slot = n_layer + 1 - act
    for device, count in enumerate(counts):
        for _ in range(count):
            out[slot] = device
            slot += 1
    return tuple(out)
