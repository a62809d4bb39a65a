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
- each layer's KV cache lives with its layer (offload_kqv, llama-kv-cache.cpp).

Buffer sizes: a device buffer holds its tensors each padded to the device's alignment
(ggml_backend_alloc_ctx_tensors_from_buft); the host's weights with mmap are a view of
the file from the first to the last byte of its tensors (llama_model_loader::
get_mapping_range), so tensors of offloaded layers lying between them count there too.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from math import ceil

from workbench.core.config.preset import Preset
from workbench.core.config.preset_split import ALL_LAYERS, effective_gpu_layers
from workbench.core.gguf.ggml_types import tensor_bytes
from workbench.core.gguf.model_info import ModelInfo, TensorInfo
from workbench.core.ledger.kv_layers import predicted_kv_layers
from workbench.core.ledger.predict import (
    CTX_PAD,
    MB,
    TIGHT_HEADROOM,
    _feed_forward_length,
    llama_n_ctx,
    predicted_overhead_bytes,
    preset_n_ubatch,
)
from workbench.core.ledger.types import DOES_NOT_FIT, FITS, TIGHT
from workbench.core.ledger.weights import planned_tensor_types

CPU = "CPU"
UNKNOWN = "unknown"  # verdict of a device whose budget nobody gave
CPU_ALIGNMENT = 32  # ggml-backend.cpp TENSOR_ALIGNMENT: the CPU buffer type (and so a CPU RPC node)
GGUF_ALIGNMENT = 32
_INPUT_TENSORS = ("token_embd.", "token_types.", "position_embd.", "per_layer_token_embd.", "token_embd_norm.")


def _f32(value: float) -> float:
    """`value` rounded to a C float, as llama.cpp computes its split points."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


@dataclass(frozen=True)
class SplitDevice:
    """A device llama.cpp may place layers on (an RPC node or a local GPU), as the ledger sees it."""

    name: str  # "RPC0", "CUDA0", "Vulkan0": llama.cpp's device name
    endpoint: str = ""  # "host:port" for an RPC node
    free_bytes: int | None = None  # what llama.cpp's default split uses (the node's report); None = unknown
    budget_bytes: int | None = None  # what the ledger checks against; None = unknown
    budget_source: str = ""
    bandwidth_bytes_per_s: float | None = None  # memory bandwidth of the device
    bandwidth_source: str = ""
    link_bytes_per_s: float | None = None  # RPC: the link to the node (probe)
    link_latency_s: float | None = None  # RPC: one round trip (probe)
    alignment: int = CPU_ALIGNMENT
    shares_host_memory: bool = False  # a local unified-memory GPU: its buffers come out of the host budget


@dataclass(frozen=True)
class DeviceLedger:
    """What one device holds under a split, against its budget."""

    name: str
    endpoint: str
    layers: tuple[int, ...]  # repeating layers held (0-based); the output layer is `holds_output`
    holds_output: bool
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    overhead_bytes: int  # host only: the engine process beyond its buffers
    budget_bytes: int | None
    budget_source: str
    verdict: str  # FITS, TIGHT, DOES_NOT_FIT, or UNKNOWN without a budget
    reason: str

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes + self.overhead_bytes

    @property
    def headroom_bytes(self) -> int | None:
        return None if self.budget_bytes is None else self.budget_bytes - self.total_bytes


@dataclass(frozen=True)
class DecodeTerm:
    what: str  # "CPU memory", "RPC0 memory", "link to RPC0", "round trips"
    seconds: float
    source: str


@dataclass(frozen=True)
class DecodeBound:
    """Bandwidth-bound time per generated token, term by term; None when a figure is unknown."""

    terms: tuple[DecodeTerm, ...]
    missing: tuple[str, ...]  # figures without a source ("RPC0 bandwidth: no profile")

    @property
    def seconds_per_token(self) -> float:
        return sum(term.seconds for term in self.terms)

    @property
    def tokens_per_s(self) -> float | None:
        return 1.0 / self.seconds_per_token if self.terms and not self.missing and self.seconds_per_token > 0 else None

    @property
    def network_seconds(self) -> float:
        return sum(term.seconds for term in self.terms if term.what.startswith(("link", "round trips")))

    def dominant(self) -> str:
        """One line naming the largest share: 'network-bound: 62% of each token is the link'."""
        total = self.seconds_per_token
        if not self.terms or total <= 0:
            return "decode bound unavailable"
        network = self.network_seconds
        if network >= total / 2:
            return f"network-bound: {network / total:.0%} of each token is the link"
        top = max(self.terms, key=lambda term: term.seconds)
        return f"memory-bound: {top.seconds / total:.0%} of each token is {top.what}"


@dataclass(frozen=True)
class SplitLedger:
    model: str
    preset: str
    ctx_size: int
    n_gpu_layers: int  # as llama.cpp gets it (-1 = all)
    splits: tuple[float, ...]  # the proportions used (tensor_split, or free memory)
    splits_source: str
    devices: tuple[DeviceLedger, ...]  # the host CPU first, then the devices in llama.cpp's order
    verdict: str
    reason: str  # names the device and the line that breaks
    max_ctx: int  # largest context (multiple of 256) every device with a budget fits; 0 = none
    best_tensor_split: tuple[int, ...]  # layers per device that balance headroom; () when not computable
    decode_empty: DecodeBound
    decode_full: DecodeBound


# -- placement ---------------------------------------------------------------------------------

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
    feed_forward = 3 * _feed_forward_length(model) + mask + 4 * n_embd
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


# -- the ledger ----------------------------------------------------------------------------------

def split_points(devices: Sequence[SplitDevice], preset: Preset) -> tuple[tuple[float, ...], str]:
    """The proportions llama.cpp splits by: tensor_split, else each device's free memory."""
    if preset.tensor_split and any(preset.tensor_split):
        values = list(preset.tensor_split[: len(devices)]) + [0.0] * max(0, len(devices) - len(preset.tensor_split))
        return tuple(values), "tensor_split"
    if all(device.free_bytes for device in devices):
        return tuple(float(device.free_bytes or 0) for device in devices), "free memory the devices report"
    return tuple(1.0 for _ in devices), "equal shares (a device's free memory is unknown)"


def _verdict(total: int, budget: int | None, name: str, lines: Sequence[tuple[str, int]]) -> tuple[str, str]:
    if budget is None:
        return UNKNOWN, f"{name}: no budget (give the node a device profile with --rpc host:port@profile)"
    headroom = budget - total
    if headroom < 0:
        running = 0
        for label, n_bytes in lines:
            running += n_bytes
            if running > budget:
                return DOES_NOT_FIT, (f"does not fit {name}: {label} takes it to {running / MB:,.0f} MB, "
                                      f"{(running - budget) / MB:,.0f} MB over its {budget / MB:,.0f} MB budget")
    if headroom < TIGHT_HEADROOM * budget:
        return TIGHT, f"tight on {name}: {headroom / MB:,.0f} MB headroom of {budget / MB:,.0f} MB"
    return FITS, f"fits {name} with {headroom / MB:,.0f} MB ({headroom / budget:.0%}) headroom"


def uses_pipeline(model: ModelInfo, preset: Preset, n_devices: int) -> bool:
    """llama-context.cpp: several devices, every layer and the output offloaded, split by layer."""
    n_gpu_layers = effective_gpu_layers(preset)
    offloads_all = n_gpu_layers < 0 or n_gpu_layers > model.n_layer
    return n_devices > 1 and offloads_all and preset.split_mode == "layer"


def _device_ledgers(model: ModelInfo, preset: Preset, n_ctx: int, host_budget: int | None, host_source: str,
                    devices: Sequence[SplitDevice], placement: Sequence[int]) -> tuple[DeviceLedger, ...]:
    n = len(devices)
    weights = weights_per_device(model, preset, placement, devices)
    kv = kv_per_device(model, preset, n_ctx, placement, n)
    llama_devices = 1 if preset.split_mode == "none" else n  # split_mode none keeps only main_gpu
    compute = compute_per_device(model, preset, n_ctx, placement, n, pipeline=uses_pipeline(model, preset, llama_devices))
    overhead = predicted_overhead_bytes(model)
    # A local unified-memory GPU's buffers come out of the host's RAM: the host line carries them.
    shared = sum(weights[i + 1] + kv[i + 1] + compute[i + 1] for i, d in enumerate(devices) if d.shares_host_memory)
    out = []
    for index in range(-1, n):
        slot = index + 1
        device = devices[index] if index >= 0 else None
        name = device.name if device else CPU
        budget = host_budget if device is None else (None if device.shares_host_memory else device.budget_bytes)
        source = host_source if device is None else ("shares the host's RAM (unified memory)"
                                                     if device.shares_host_memory else device.budget_source)
        extra = overhead + shared if device is None else 0
        lines = [("the weights", weights[slot]), ("the KV cache", kv[slot]), ("the compute buffer", compute[slot])]
        if device is None:
            lines += [("the runtime overhead", overhead)] + ([("the unified GPU's buffers", shared)] if shared else [])
        total = weights[slot] + kv[slot] + compute[slot] + extra
        verdict, reason = _verdict(total, budget, name, lines)
        if device is not None and device.shares_host_memory:
            verdict, reason = FITS, f"{name}: counted in the host's budget (unified memory)"
        out.append(DeviceLedger(
            name=name, endpoint=device.endpoint if device else "",
            layers=tuple(il for il, where in enumerate(placement[:-1]) if where == index),
            holds_output=placement[-1] == index, weights_bytes=weights[slot], kv_bytes=kv[slot],
            compute_bytes=compute[slot], overhead_bytes=extra, budget_bytes=budget, budget_source=source,
            verdict=verdict, reason=reason,
        ))
    return tuple(out)


def _overall(ledgers: Sequence[DeviceLedger]) -> tuple[str, str]:
    for verdict in (DOES_NOT_FIT, TIGHT, UNKNOWN):
        broken = [ledger for ledger in ledgers if ledger.verdict == verdict]
        if broken:
            return verdict, "; ".join(ledger.reason for ledger in broken)
    return FITS, "fits every device"


def _max_ctx(model: ModelInfo, preset: Preset, host_budget: int | None, devices: Sequence[SplitDevice],
             placement: Sequence[int]) -> int:
    def fits(n_ctx: int) -> bool:
        ledgers = _device_ledgers(model, preset, n_ctx, host_budget, "", devices, placement)
        return all(ledger.verdict != DOES_NOT_FIT for ledger in ledgers)

    low, high = 0, (model.n_ctx_train or 1 << 20) // CTX_PAD
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle * CTX_PAD):
            low = middle
        else:
            high = middle - 1
    return low * CTX_PAD


def _best_split(model: ModelInfo, preset: Preset, n_ctx: int, devices: Sequence[SplitDevice],
                n_gpu_layers: int) -> tuple[int, ...]:
    """Layers per device (as a tensor_split) that leave each device the same share of its budget free.

    Greedy: the offloaded slots are handed out one at a time to the device that keeps the
    largest share of its budget after taking it. Given as whole layer counts, llama.cpp's
    rule reproduces exactly this placement (slot j goes to device k while j < c0 + ... + ck).
    """
    if not devices or any(d.budget_bytes is None or d.shares_host_memory for d in devices):
        return ()
    n_layer = model.n_layer
    act = min(n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers, n_layer + 1)
    if act <= 0:
        return ()
    counts = [0] * len(devices)
    for _ in range(act):
        shares = []
        for index, device in enumerate(devices):
            trial = counts.copy()
            trial[index] += 1
            ledgers = _device_ledgers(model, preset, n_ctx, None, "", devices, _placement_of(n_layer, act, trial))
            shares.append((device.budget_bytes - ledgers[index + 1].total_bytes) / device.budget_bytes)
        counts[max(range(len(devices)), key=lambda i: shares[i])] += 1
    return tuple(counts)


def _placement_of(n_layer: int, act: int, counts: Sequence[int]) -> tuple[int, ...]:
    """Slots from n_layer + 1 - act on, handed to the devices in order, `counts[k]` each (the rest on the CPU)."""
    out = [-1] * (n_layer + 1)
    slot = n_layer + 1 - act
    for device, count in enumerate(counts):
        for _ in range(count):
            out[slot] = device
            slot += 1
    return tuple(out)


def _decode(model: ModelInfo, preset: Preset, ledgers: Sequence[DeviceLedger], devices: Sequence[SplitDevice],
            host_bandwidth: float | None, kv_fraction: float, placement: Sequence[int]) -> DecodeBound:
    """Per token: each device reads its weights (the embedding table only one row) and its KV; each hop
    to an RPC node sends one token's activations (n_embd f32) and brings them back, one round trip each."""
    terms, missing = [], []
    # The input embedding is read by get_rows: one row per token, not the table; unless the table
    # is also the output layer's weight (tied embeddings) on the CPU, which reads all of it.
    tied = not any(tensor.name == "output.weight" for tensor in model.tensors)
    embd_table = next((t.n_bytes for t in model.tensors if t.name == "token_embd.weight"), 0)
    skipped = 0 if tied and placement[-1] < 0 else embd_table
    for index, ledger in enumerate(ledgers):
        device = devices[index - 1] if index else None
        read = ledger.weights_bytes + ledger.kv_bytes * kv_fraction
        if device is None:
            read -= skipped
        bandwidth = host_bandwidth if device is None else device.bandwidth_bytes_per_s
        if not read:
            continue
        if not bandwidth:
            missing.append(f"{ledger.name} memory bandwidth")
            continue
        source = "host profile" if device is None else device.bandwidth_source
        terms.append(DecodeTerm(f"{ledger.name} memory", max(0, read) / bandwidth, source))
    # Hops: the activations leave the host for each run of layers on an RPC node and come back.
    runs, previous = [], -1
    for where in placement:
        if where != previous and where >= 0 and devices[where].endpoint:
            runs.append(where)
        previous = where
    for where in runs:
        device = devices[where]
        sent = model.n_embd * 4 * 2  # the token's hidden state there and back (f32)
        if placement[-1] == where:
            sent += model.n_vocab * 4  # the logits come back from the node holding the output
        if device.link_bytes_per_s:
            terms.append(DecodeTerm(f"link to {device.name}", sent / device.link_bytes_per_s, "node probe"))
        else:
            missing.append(f"link to {device.name} throughput (probe the node)")
        if device.link_latency_s is not None:
            terms.append(DecodeTerm(f"round trips to {device.name}", device.link_latency_s, "node probe"))
        else:
            missing.append(f"round trip to {device.name} (probe the node)")
    return DecodeBound(tuple(terms), tuple(missing))


def predict_split(model: ModelInfo, preset: Preset, devices: Sequence[SplitDevice], *, host_budget_bytes: int | None,
                  host_budget_source: str = "host profile", host_bandwidth_bytes_per_s: float | None = None,
                  ctx_size: int | None = None) -> SplitLedger:
    """The per-device ledger of `preset` with these devices (RPC nodes first, then local GPUs)."""
    n_ctx = llama_n_ctx(model, preset.ctx_size if ctx_size is None else ctx_size)
    n_gpu_layers = effective_gpu_layers(preset)
    chosen = list(devices)
    if preset.split_mode == "none" and chosen:
        chosen = [chosen[min(preset.main_gpu, len(chosen) - 1)]]
    splits, splits_source = split_points(chosen, preset)
    placement = layer_devices(model.n_layer, n_gpu_layers if chosen else 0, splits)
    if preset.split_mode == "none" and len(devices) > 1:
        # Map the one chosen device back to its index among all devices.
        index = devices.index(chosen[0])
        placement = tuple(index if where >= 0 else -1 for where in placement)
        chosen = list(devices)
    ledgers = _device_ledgers(model, preset, n_ctx, host_budget_bytes, host_budget_source, chosen, placement)
    verdict, reason = _overall(ledgers)
    return SplitLedger(
        model=model.name, preset=preset.name, ctx_size=n_ctx, n_gpu_layers=n_gpu_layers, splits=splits,
        splits_source=splits_source, devices=ledgers, verdict=verdict, reason=reason,
        max_ctx=_max_ctx(model, preset, host_budget_bytes, chosen, placement),
        best_tensor_split=_best_split(model, preset, n_ctx, chosen, n_gpu_layers),
        decode_empty=_decode(model, preset, ledgers, chosen, host_bandwidth_bytes_per_s, 0.0, placement),
        decode_full=_decode(model, preset, ledgers, chosen, host_bandwidth_bytes_per_s, 1.0, placement),
    )


__all__ = ["ALL_LAYERS", "DecodeBound", "DeviceLedger", "SplitDevice", "SplitLedger", "layer_devices",
           "predict_split", "weights_per_device"]
