"""The `host` device profile: this machine's RAM, cores and memory bandwidth, detected now."""

from __future__ import annotations

import math
import os
import platform
from datetime import datetime, timezone

import psutil

from workbench.core.config.bandwidth import BandwidthMeasurement, cache_path, host_bandwidth
from workbench.core.config.preset import DeviceProfile
from workbench.core.units import MIB, threads_text


def probed_profile_name(hostname: str | None = None) -> str:
    """The user profile `workbench devices probe` writes for this machine (or the one named): its host
    name, lowercased."""
    name = platform.node() if hostname is None else hostname
    node = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "machine"
    return f"{node[:40]}-probed"


def profile_is_this_machine(profile_name: str, hostname: str | None = None) -> bool:
    """Whether a device profile describes the machine the engine runs on (this one, or the one named):
    the detected host or that machine's probed profile. Any other profile is a board simulated here:
    its memory verdict is the board's, a rate measured here is this machine's."""
    return profile_name in ("host", probed_profile_name(hostname))


def os_reserve_mb(total_bytes: int, available_bytes: int) -> int:
    """What the OS and everything already running hold: total minus available, rounded up to 10 MiB.

    "Available" (MemAvailable) counts page cache and reclaimable slab as free, because
    the kernel hands them over when the model asks, so they are not reserved.
    """
    return int(math.ceil((total_bytes - available_bytes) / MIB / 10) * 10)


# The workbench's own children (engines, RPC nodes, the quantizer) run as
# `python -c <bootstrap> <package root> workbench.core.<module> ...` (engine/child_process.py).
CHILD_MODULE_PREFIX = "workbench.core."


def is_workbench_child(cmdline: list[str]) -> bool:
    return len(cmdline) >= 5 and cmdline[1] == "-c" and cmdline[4].startswith(CHILD_MODULE_PREFIX)


def workbench_children_bytes(processes=None) -> int:
    """The anonymous memory (RSS minus file-backed and shared pages) of every workbench child on this
    machine (or among `processes`): what total - available counts for them but a load after they are gone
    does not have to share. Their mapped model files are page cache, which MemAvailable already counts."""
    held = 0
    for process in psutil.process_iter() if processes is None else processes:
        try:
            if is_workbench_child(process.cmdline()):
                memory = process.memory_info()
                held += max(memory.rss - getattr(memory, "shared", 0), 0)
        except (psutil.Error, OSError):
            continue  # gone or not ours to read: not counted
    return held


def detect_host(*, bandwidth: BandwidthMeasurement | None = None) -> DeviceProfile:
    """This machine as a device profile; the bandwidth probe runs once per machine (cached)."""
    memory = psutil.virtual_memory()
    physical = psutil.cpu_count(logical=False)
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    measured = bandwidth or host_bandwidth()
    own = workbench_children_bytes()  # left out: the reserve must not swing with the workbench's own engines
    reserve = os_reserve_mb(memory.total, min(memory.available + own, memory.total))
    detected_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if physical:
        cores_note = f"psutil.cpu_count(logical=False): {physical} physical cores ({logical} logical CPUs)"
    else:
        cores_note = f"physical core count unavailable from psutil; using the {logical} logical CPUs"
    probe_when = f"at {measured.measured_at}" + (" (cached)" if measured.from_cache else "")
    notes = (
        ("ram_total_mb", f"psutil.virtual_memory().total at {detected_at}: RAM the kernel manages "
                         "(firmware and kernel reservations are already excluded)"),
        ("reserves_mb.os", f"in use at {detected_at}: total - available (psutil, MemAvailable) rounded up "
                           f"to 10 MiB = the OS and every running program except the workbench's own engines "
                           f"and nodes ({own / MIB:,.0f} MiB of theirs left out, so the verdict does not depend on "
                           "what the workbench runs now); page cache counts as available because the kernel "
                           "reclaims it"),
        ("mem_bandwidth_gbs", f"measured on this machine {probe_when}: best of {measured.passes} passes of "
                              f"{threads_text(measured.threads)} each reading its own {measured.buffer_mb} MB "
                              f"buffer at once (aggregate read, as decode reads weights); cached in {cache_path()}"),
        ("power_limit_w", "not detected: the host profile reads no power limit (see `workbench monitor` "
                          "for measured power)"),
        ("cores", cores_note),
    )
    return DeviceProfile(
        name="host",
        ram_total_mb=memory.total // MIB,
        reserves_mb=(("os", reserve),),
        mem_bandwidth_gbs=measured.gbs,
        power_limit_w=None,
        cores=physical or logical,
        description=f"this machine ({platform.node()}, {platform.machine()}), detected {detected_at}",
        notes=notes,
        source="detected",
    )
