"""The devices a fit may split over: the --rpc nodes (their profiles, else what they report) and the host's GPU."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.core.config.preset import DeviceProfile
from workbench.core.config.rpc_endpoints import RpcEndpoint
from workbench.core.ledger.split_types import SplitDevice
from workbench.core.rpc.nodes import node_profiles, probe_nodes, split_devices


def fit_devices(host: DeviceProfile, endpoints: Sequence[RpcEndpoint]) -> tuple[SplitDevice, ...]:
    """In llama.cpp's order; () when the host has no GPU and no node is given (the host ledger alone).
    A node with a profile is not probed: its budget is the profile's. A GPU the profile marks slower than
    the CPU (accelerator_slower_than_cpu) is left out, as offload_problems advises."""
    profiles = node_profiles(endpoints)
    unprofiled = [e for e, p in zip(endpoints, profiles, strict=True) if p is None]
    probed = dict(zip(unprofiled, probe_nodes(unprofiled, measure_link=False), strict=True))
    reports = [probed.get(endpoint) for endpoint in endpoints]
    devices = split_devices(host, endpoints, reports, profiles)
    if host.accelerator_slower_than_cpu:  # published runs: offloading to this GPU is slower than its CPU
        devices = devices[:len(endpoints)]
    return devices
