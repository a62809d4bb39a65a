"""Fixes that change where layers go, not the preset alone: layers on the profile's GPU, layers on a second node.

Priced with the per-device ledger (ledger/split.py): what the host still holds once the most layers its
devices' budgets take are moved there (llama.cpp offloads the last gpu_layers layers first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.gpu_device import local_gpu_device
from workbench.core.ledger.split import predict_split
from workbench.core.ledger.split_types import UNKNOWN, SplitDevice, SplitLedger
from workbench.core.ledger.types import DOES_NOT_FIT, Ledger, LedgerFix
from workbench.core.units import MIB


def _split(model: ModelInfo, preset: Preset, device: DeviceProfile, devices: Sequence[SplitDevice], layers: int,
           n_ctx: int) -> SplitLedger:
    return predict_split(model, dataclasses.replace(preset, gpu_layers=layers), devices,
                         host_budget_bytes=device.budget_mb * MIB, host_budget_source=f"device profile {device.name}",
                         ctx_size=n_ctx)


def _most_layers(model: ModelInfo, preset: Preset, device: DeviceProfile, devices: Sequence[SplitDevice],
                 n_ctx: int) -> int:
    """The most layers (the output layer counted as one more) the devices other than the host hold."""
    low, high = 0, model.n_layer + 1
    while low < high:
        middle = (low + high + 1) // 2
        split = _split(model, preset, device, devices, middle, n_ctx)
        if all(ledger.verdict not in (DOES_NOT_FIT, UNKNOWN) for ledger in split.devices[1:]):
            low = middle
        else:
            high = middle - 1
    return low


def _offload_fix(model: ModelInfo, preset: Preset, device: DeviceProfile, devices: Sequence[SplitDevice],
                 ledger: Ledger, cost: str) -> LedgerFix | None:
    layers = _most_layers(model, preset, device, devices, ledger.ctx_size)
    if layers == 0:
        return None
    value = -1 if layers > model.n_layer else layers
    split = _split(model, preset, device, devices, value, ledger.ctx_size)
    names = ", ".join(d.name + (f" ({d.endpoint})" if d.endpoint else "") for d in devices)
    count = "all" if value == -1 else str(value)
    changes: tuple[tuple[str, object], ...] = (("gpu_layers", value),)
    rpc = tuple(d.endpoint for d in devices if d.endpoint)
    if rpc:
        changes += (("rpc", rpc),)
    return LedgerFix(change=f"gpu_layers {count} on {names}", preset_changes=changes,
                     saved_bytes=ledger.total_bytes - split.devices[0].total_bytes, cost=cost,
                     fits=split.verdict not in (DOES_NOT_FIT, UNKNOWN))


def gpu_layers_fix(model: ModelInfo, preset: Preset, device: DeviceProfile, ledger: Ledger) -> LedgerFix | None:
    """Layers on the profile's own GPU memory (vram_mb). None for unified memory (its buffers come out of
    the same budget), a profile without a GPU, or one whose GPU published runs show slower than its CPU."""
    gpu = local_gpu_device(device)
    if gpu is None or gpu.shares_host_memory or device.accelerator_slower_than_cpu or preset.gpu_layers:
        return None
    return _offload_fix(model, preset, device, [gpu], ledger,
                        f"a {device.accelerator} build of llama.cpp; the layers run on {gpu.name} from its "
                        f"{device.vram_mb:,} MiB")


def second_node_fix(model: ModelInfo, preset: Preset, device: DeviceProfile, nodes: Sequence[SplitDevice],
                    ledger: Ledger) -> LedgerFix | None:
    """Layers on the given RPC nodes whose budget is known (a node profile, or the free memory it reports)."""
    known = [node for node in nodes if node.budget_bytes is not None]
    if not known or preset.rpc:
        return None
    gpu = local_gpu_device(device)
    devices = known + ([gpu] if gpu is not None and not device.accelerator_slower_than_cpu else [])
    return _offload_fix(model, preset, device, devices, ledger,
                        "every token crosses the link to the node and back (llama.cpp's RPC backend); the node "
                        "runs `workbench node`")


def with_placement_fixes(ledger: Ledger, model: ModelInfo, preset: Preset, device: DeviceProfile,
                         nodes: Sequence[SplitDevice] = ()) -> Ledger:
    """The ledger with the GPU-layers and second-node fixes among its fixes when it does not fit: a GPU fix
    that fits first (it costs no quality), a node fix after the other fixes that fit, ones that do not at the end."""
    if ledger.verdict != DOES_NOT_FIT:
        return ledger
    sized = dataclasses.replace(preset, ctx_size=ledger.ctx_size)
    gpu, node = gpu_layers_fix(model, sized, device, ledger), second_node_fix(model, sized, device, nodes, ledger)
    fitting = [fix for fix in ledger.fixes if fix.fits]
    rest = [fix for fix in ledger.fixes if not fix.fits]
    for fix, first in ((gpu, True), (node, False)):
        if fix is None:
            continue
        if not fix.fits:
            rest.append(fix)
        elif first:
            fitting.insert(0, fix)
        else:
            fitting.append(fix)
    return dataclasses.replace(ledger, fixes=tuple(fitting + rest))
