"""The fit search with devices of their own (RPC nodes, a GPU): gpu_layers, n_cpu_moe and the per-device ledger.

For a MoE model on a GPU with its own memory that cannot hold every layer, the routed experts of the
first N layers stay in host memory (n_cpu_moe, llama-server --n-cpu-moe) with every layer on the GPU,
N the fewest that fit, before any layer leaves the GPU: the attention and the shared weights that every
token reads stay on the GPU, and only the experts a token picks are read from host memory (llama.cpp's
--fit moves MoE experts off the GPU first too, common/fit.cpp).
"""

from __future__ import annotations

import dataclasses

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.fit.quality import cache_loss
from workbench.core.fit.types import FitCandidate, FitRequest, WeightOption
from workbench.core.ledger.experts import expert_counts
from workbench.core.ledger.kv_layers import CTX_PAD
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.speed import SpeedCorrection
from workbench.core.ledger.split import predict_split
from workbench.core.ledger.split_types import UNKNOWN, SplitLedger
from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.units import MIB


def split_of(option: WeightOption, preset: Preset, device: DeviceProfile, request: FitRequest, gpu_layers: int,
             ctx: int) -> tuple[Preset, SplitLedger]:
    rpc = tuple(d.endpoint for d in request.devices if d.endpoint)
    sized = dataclasses.replace(preset, gpu_layers=gpu_layers, rpc=rpc, ctx_size=ctx)
    split = predict_split(option.model, sized, request.devices, host_budget_bytes=device.budget_mb * MIB,
                          host_budget_source=f"device profile {device.name}",
                          host_bandwidth_bytes_per_s=device.mem_bandwidth_gbs * 1e9 or None, host_profile=device)
    return sized, split


def _devices_fit(split: SplitLedger) -> bool:
    return all(ledger.verdict not in (DOES_NOT_FIT, UNKNOWN) for ledger in split.devices[1:])


def most_layers(option: WeightOption, preset: Preset, device: DeviceProfile, request: FitRequest, ctx: int) -> int:
    """The most layers (the output layer counted as one more) the devices hold at `ctx`: the fastest split
    that leaves the host the rest. llama.cpp offloads the last gpu_layers layers."""
    low, high = 0, option.model.n_layer + 1
    while low < high:
        middle = (low + high + 1) // 2
        if _devices_fit(split_of(option, preset, device, request, middle, ctx)[1]):
            low = middle
        else:
            high = middle - 1
    return low


def fewest_cpu_moe(option: WeightOption, preset: Preset, device: DeviceProfile, request: FitRequest,
                   ctx: int) -> int:
    """The fewest layers whose experts stay on the CPU so that every layer fits the devices at `ctx`; 0 if
    not even all of them do. More layers on the CPU only ever take bytes off the devices."""
    n_layer = option.model.n_layer

    def fits(n_cpu_moe: int) -> bool:
        return _devices_fit(split_of(option, dataclasses.replace(preset, n_cpu_moe=n_cpu_moe), device, request,
                                     -1, ctx)[1])

    if not fits(n_layer):
        return 0
    low, high = 1, n_layer
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _experts_may_move(option: WeightOption, device: DeviceProfile) -> bool:
    """A MoE model and a GPU with memory of its own (on unified memory the experts' bytes stay in the same RAM)."""
    return device.vram_mb is not None and device.accelerator != "none" and expert_counts(option.model) is not None


def fit_split(option: WeightOption, preset: Preset, device: DeviceProfile, request: FitRequest,
              correction: SpeedCorrection | None, loss: tuple[float, str]) -> FitCandidate | None:
    if preset.ubatch_size != request.base.ubatch_size:
        return None  # a split is priced per layer and device: the search keeps the base's ubatch
    ctx_min = max(request.ctx_min, CTX_PAD)
    preset = dataclasses.replace(preset, n_cpu_moe=0)
    layers = most_layers(option, preset, device, request, ctx_min)
    if layers <= option.model.n_layer and _experts_may_move(option, device):
        n_cpu_moe = fewest_cpu_moe(option, preset, device, request, ctx_min)
        candidate = fit_split_at(option, dataclasses.replace(preset, n_cpu_moe=n_cpu_moe), device, request,
                                 correction, loss, -1) if n_cpu_moe else None
        if candidate is not None:
            return candidate
    return fit_split_at(option, preset, device, request, correction, loss,
                        -1 if layers > option.model.n_layer else layers)


def fit_split_at(option: WeightOption, preset: Preset, device: DeviceProfile, request: FitRequest,
                 correction: SpeedCorrection | None, loss: tuple[float, str], gpu_layers: int) -> FitCandidate | None:
    """The candidate with `gpu_layers` on the devices and the largest context the split holds; None if none."""
    ctx_min = max(request.ctx_min, CTX_PAD)
    sized, split = split_of(option, preset, device, request, gpu_layers, ctx_min)
    if split.verdict in (DOES_NOT_FIT, UNKNOWN) or split.max_ctx < ctx_min:
        return None
    sized, split = split_of(option, preset, device, request, gpu_layers, split.max_ctx)
    if split.verdict in (DOES_NOT_FIT, UNKNOWN):
        return None
    ledger = predict_ledger(option.model, sized, device, speed_correction=correction, largest_contexts=False)
    rate = split.rate_empty if split.rate_empty is not None and split.rate_empty.tokens_per_s else None
    if rate is not None:
        tps, source = rate.tokens_per_s, "speed model of the split"
    elif split.decode_empty.tokens_per_s:
        tps, source = split.decode_empty.tokens_per_s, "bandwidth bound of the split"
    else:
        tps, source = None, "unavailable (no bandwidth for a device of the split)"
    return FitCandidate(sized, option, loss[0] + cache_loss(preset.cache_type_k), loss[1], tps, source, ledger, split)
