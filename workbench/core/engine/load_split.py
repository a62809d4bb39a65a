"""Before a split load: every RPC node probed (refused by name if one is down), the per-device ledger checked."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from workbench.core.config.devices import load_device
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.load_refused import LOAD_ANYWAY, LoadRefused
from workbench.core.errors import WorkbenchError
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.split import predict_split
from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.rpc.nodes import endpoints_of, node_profiles, probe_nodes, split_devices
from workbench.core.units import MIB


def describe_split(split) -> str:
    """The per-device prediction in one line, device by device in MiB."""
    parts = []
    for device in split.devices:
        where = f" {device.endpoint}" if device.endpoint else ""
        budget = f" of {device.budget_bytes / MIB:.0f}" if device.budget_bytes is not None else ""
        parts.append(f"{device.name}{where}: {len(device.layers)} layers{' + output' if device.holds_output else ''}, "
                     f"weights {device.weights_bytes / MIB:.0f} + KV {device.kv_bytes / MIB:.0f} "
                     f"+ compute {device.compute_bytes / MIB:.0f}"
                     + (f" + overhead {device.overhead_bytes / MIB:.0f}" if device.overhead_bytes else "")
                     + f" = {device.total_bytes / MIB:.0f}{budget} MiB ({device.verdict})")
    return "per-device ledger: " + "; ".join(parts)


def plan_split(model: ModelInfo, preset: Preset, host: DeviceProfile | None, rpc: Sequence,
               *, allow_overbudget: bool) -> tuple[str, tuple[str, ...]]:
    """(one-line prediction, node addresses) or LoadRefused naming the unreachable node or the device that overflows."""

    try:
        endpoints = endpoints_of(preset, rpc)
        profiles = node_profiles(endpoints)
    except WorkbenchError as error:
        raise LoadRefused("refused", str(error)) from None

    preset = dataclasses.replace(preset, rpc=tuple(endpoint.address for endpoint in endpoints))
    reports = probe_nodes(endpoints, measure_link=False)
    for report in reports:
        if not report.reachable:
            raise LoadRefused("refused", f"RPC node {report.address} is unreachable: {report.reason}. Nothing was "
                              "loaded; start the node (`workbench node serve`) or drop it from --rpc")
    host = host or load_device("host")
    devices = split_devices(host, endpoints, reports, profiles)
    split = predict_split(model, preset, devices, host_budget_bytes=host.budget_mb * MIB,
                          host_budget_source=f"device profile {host.name}",
                          host_bandwidth_bytes_per_s=host.mem_bandwidth_gbs * 1e9 or None)
    prediction = describe_split(split)
    if split.verdict == DOES_NOT_FIT and not allow_overbudget:
        raise LoadRefused("refused", f"preset {preset.name}: {split.reason}; {prediction}. Move layers "
                          f"with tensor_split or gpu_layers, shorten the context, or {LOAD_ANYWAY}")
    return prediction, tuple(endpoint.address for endpoint in endpoints)
