"""The devices of a split as the ledger sees them: RPC nodes (profile or probe) and the host's own GPU."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from workbench.core.config.devices import load_device
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.rpc_endpoints import RpcEndpoint, parse_endpoint
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.gpu_device import local_gpu_device
from workbench.core.ledger.split import predict_split
from workbench.core.ledger.split_types import SplitDevice, SplitLedger
from workbench.core.rpc.wire import NodeReport, probe_node
from workbench.core.units import MIB


def probe_nodes(endpoints: Sequence[RpcEndpoint], *, measure_link: bool = True, timeout_s: float = 5.0) -> tuple[NodeReport, ...]:
    """Probe every node at once (each one is a separate machine; a dead one costs its timeout, not the sum)."""
    if not endpoints:
        return ()
    with ThreadPoolExecutor(max_workers=len(endpoints)) as pool:
        return tuple(pool.map(lambda e: probe_node(e, timeout_s=timeout_s, round_trips=10 if measure_link else 0,
                                                   transfer_bytes=1 << 20 if measure_link else 0), endpoints))


def endpoints_of(preset: Preset, override: Sequence[RpcEndpoint] = ()) -> tuple[RpcEndpoint, ...]:
    """The nodes of a load: the --rpc override when given, else the preset's `rpc` list."""
    return tuple(override) if override else tuple(parse_endpoint(address) for address in preset.rpc)


def rpc_device(index: int, endpoint: RpcEndpoint, report: NodeReport | None, profile: DeviceProfile | None) -> SplitDevice:
    free = report.free_bytes if report is not None and report.reachable else None
    if profile is not None:
        budget, source = profile.budget_mb * MIB, f"device profile {profile.name}"
        bandwidth, bandwidth_source = profile.mem_bandwidth_gbs * 1e9 or None, f"device profile {profile.name}"
    else:
        budget, source = free, "free memory the node reports" if free is not None else ""
        bandwidth, bandwidth_source = None, ""
    return SplitDevice(
        name=f"RPC{index}", endpoint=endpoint.address, free_bytes=free, budget_bytes=budget, budget_source=source,
        bandwidth_bytes_per_s=bandwidth, bandwidth_source=bandwidth_source,
        link_bytes_per_s=report.link_bytes_per_s if report is not None else None,
        link_latency_s=report.latency_s if report is not None else None,
        speed_profile=profile, speed_source=f"device profile {profile.name}" if profile is not None else "",
    )


def split_devices(host: DeviceProfile, endpoints: Sequence[RpcEndpoint], reports: Sequence[NodeReport | None],
                  profiles: Sequence[DeviceProfile | None]) -> tuple[SplitDevice, ...]:
    """In llama.cpp's order: the RPC nodes first, then the host's own GPU when its profile has one."""
    devices = [rpc_device(i, e, r, p) for i, (e, r, p) in enumerate(zip(endpoints, reports, profiles, strict=True))]
    # A node on this machine without a profile runs llama.cpp's CPU backend on the host's cores and RAM.
    devices = [dataclasses.replace(d, speed_profile=host, speed_source="local node: the host's figures")
               if d.speed_profile is None and is_local(d.endpoint) else d for d in devices]
    gpu = local_gpu_device(host)
    return tuple(devices + ([gpu] if gpu is not None else []))


def is_local(address: str) -> bool:
    """Whether host:port names this machine (a loopback address or localhost)."""
    name = address.rsplit(":", 1)[0].strip("[]").lower()
    return name in ("localhost", "::1") or name.startswith("127.")


def node_profiles(endpoints: Sequence[RpcEndpoint]) -> tuple[DeviceProfile | None, ...]:
    return tuple(load_device(endpoint.profile) if endpoint.profile else None for endpoint in endpoints)


def predict_devices(model: ModelInfo, preset: Preset, host: DeviceProfile, rpc: tuple, *, ctx_size: int | None = None,
                    measure_link: bool = True) -> tuple[SplitLedger, tuple[NodeReport, ...]]:
    """(SplitLedger, node reports): the nodes probed at once, then the per-device ledger."""
    endpoints = endpoints_of(preset, rpc)
    preset = dataclasses.replace(preset, rpc=tuple(endpoint.address for endpoint in endpoints))
    reports = probe_nodes(endpoints, measure_link=measure_link)
    devices = split_devices(host, endpoints, reports, node_profiles(endpoints))
    split = predict_split(model, preset, devices, host_budget_bytes=host.budget_mb * MIB,
                          host_budget_source=f"device profile {host.name}",
                          host_bandwidth_bytes_per_s=host.mem_bandwidth_gbs * 1e9 or None, ctx_size=ctx_size,
                          host_profile=host)
    return split, reports
