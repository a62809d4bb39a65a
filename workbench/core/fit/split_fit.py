"""The fit search with devices of their own (RPC nodes, a GPU): gpu_layers and the per-device ledger."""

from __future__ import annotations

import dataclasses

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.fit.quality import cache_loss
from workbench.core.fit.types import FitCandidate, FitRequest, WeightOption
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


def fit_split(option: WeightOption, preset: Preset, device: DeviceProfile, request: FitRequest,
              correction: SpeedCorrection | None, loss: tuple[float, str]) -> FitCandidate | None:
    if preset.ubatch_size != request.base.ubatch_size:
        return None  # a split is priced per layer and device: the search keeps the base's ubatch
    ctx_min = max(request.ctx_min, CTX_PAD)
    layers = most_layers(option, preset, device, request, ctx_min)
    gpu_layers = -1 if layers > option.model.n_layer else layers
    sized, split = split_of(option, preset, device, request, gpu_layers, ctx_min)
    if split.verdict in (DOES_NOT_FIT, UNKNOWN) or split.max_ctx < ctx_min:
        return None
    sized, split = split_of(option, preset, device, request, gpu_layers, split.max_ctx)
    if split.verdict in (DOES_NOT_FIT, UNKNOWN):
        return None
    ledger = predict_ledger(option.model, sized, device, speed_correction=correction)
    rate = split.rate_empty if split.rate_empty is not None and split.rate_empty.tokens_per_s else None
    if rate is not None:
        tps, source = rate.tokens_per_s, "speed model of the split"
    elif split.decode_empty.tokens_per_s:
        tps, source = split.decode_empty.tokens_per_s, "bandwidth bound of the split"
    else:
        tps, source = None, "unavailable (no bandwidth for a device of the split)"
    return FitCandidate(sized, option, loss[0] + cache_loss(preset.cache_type_k), loss[1], tps, source, ledger, split)
