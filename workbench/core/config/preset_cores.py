"""Which CPUs a preset runs on: the `cpu_cores` key (llama-server -C / --cpu-range), its checks, and threads = 0."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import psutil

from workbench.core.config import cpu_topology
from workbench.core.config.cpu_topology import MAX_CPUS, CpuTopology, format_cpu_list, parse_cpu_list
from workbench.core.config.toml_checks import TomlSource, wrong_type
from workbench.core.errors import PresetError
from workbench.core.units import threads_text

CORE_KEYS = ("cpu_cores",)
_EXAMPLE = 'cpu_cores = "4-7" (or [4, 5, 6, 7])'


def cpu_cores_field(data: dict[str, Any], source: TomlSource) -> tuple[int, ...]:
    """The checked `cpu_cores` of a preset: () when absent; PresetError (file:line) when malformed
    or when it names a CPU this machine does not have."""
    if "cpu_cores" not in data:
        return ()
    value = data["cpu_cores"]
    where = source.where("cpu_cores")
    if isinstance(value, str):
        try:
            cores = parse_cpu_list(value)
        except ValueError as error:
            raise PresetError(f'cpu_cores = "{value[:40]}" is not a list of CPUs: {error}', where=where,
                              fix=f"Write {_EXAMPLE}: CPU numbers and lo-hi ranges, as llama-server's --cpu-range") from None
    elif isinstance(value, list):
        bad = [item for item in value if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < MAX_CPUS]
        if bad:
            raise PresetError(f"cpu_cores entry {bad[0]!r} is not a CPU number", where=where,
                              fix=f"Each entry is a CPU number from 0 to {MAX_CPUS - 1}, e.g. {_EXAMPLE}")
        cores = tuple(sorted(set(value)))
    else:
        raise wrong_type("cpu_cores", value, "a CPU list", _EXAMPLE, source)
    if not cores:
        raise PresetError("cpu_cores is empty", where=where,
                          fix="Leave cpu_cores out to let threads = 0 choose the fast cores, or list CPUs, e.g. "
                              + _EXAMPLE)
    machine = cpu_topology.host_cpu_topology().all_cpus
    missing = [cpu for cpu in cores if machine and cpu not in machine]
    if missing:
        raise PresetError(f"cpu_cores names CPU {format_cpu_list(missing)}, which this machine does not have "
                          f"(its CPUs are {format_cpu_list(machine)})", where=where,
                          fix=f'List CPUs from {format_cpu_list(machine)}, e.g. cpu_cores = "{format_cpu_list(machine)}", '
                              "or leave cpu_cores out")
    return cores


def cores_toml(preset: Any) -> dict[str, Any]:
    """`cpu_cores` as a TOML file says it ("4-7"), left out when the preset does not pin."""
    return {"cpu_cores": format_cpu_list(preset.cpu_cores)} if preset.cpu_cores else {}


@dataclass(frozen=True)
class CoreChoice:
    """The threads a preset runs with on a machine, the CPUs they are pinned to, and why."""

    threads: int
    cpus: tuple[int, ...]  # the CPUs the engine is pinned to; () = not pinned (every CPU the OS allows)
    reason: str


def physical_cores_minus_one(topology: CpuTopology | None = None) -> int:
    """The rule for machines whose cores are alike: physical cores minus one (at least one), leaving a
    core for the OS and the UI. Physical cores of this machine from psutil, or of `topology`'s CPUs."""
    cores = topology.fast_cores if topology is not None and topology.cpus else None
    cores = cores or psutil.cpu_count(logical=False) or os.cpu_count() or 1
    return max(1, cores - 1)


def core_choice(preset: Any, topology: CpuTopology | None = None) -> CoreChoice:
    """How `preset` runs on the machine `topology` describes (this one when None).

    Explicit `cpu_cores` pin there (threads = 0 then means one thread per listed CPU). On
    big.LITTLE boards threads = 0 means one thread per fast core, pinned to the fast CPUs,
    and an explicit thread count that fits on the fast cores is pinned there too; a count
    past them is left unpinned, as asked. Machines whose cores are alike keep physical
    cores minus one, unpinned.
    """
    machine = topology or cpu_topology.host_cpu_topology()
    if preset.cpu_cores:
        threads = preset.threads or len(preset.cpu_cores)
        where = format_cpu_list(preset.cpu_cores)
        return CoreChoice(threads, tuple(preset.cpu_cores), f"{threads_text(threads)} on CPUs {where} (the preset's cpu_cores)")
    fast = format_cpu_list(machine.fast)
    if machine.heterogeneous and preset.threads <= machine.fast_cores:
        threads = preset.threads or machine.fast_cores
        said = "threads = 0: one per fast core" if not preset.threads else "the preset's threads"
        return CoreChoice(threads, machine.fast, f"{threads_text(threads)} ({said}) pinned to CPUs {fast}: {machine.reason}")
    if preset.threads:
        return CoreChoice(preset.threads, (), f"{threads_text(preset.threads)} (the preset's), not pinned: {machine.reason}")
    threads = physical_cores_minus_one(topology)
    return CoreChoice(threads, (), f"{threads_text(threads)} (threads = 0: physical cores minus one), not pinned: "
                                   f"{machine.reason}")


def cores_server_args(cpus: tuple[int, ...]) -> list[str]:
    """llama-server's affinity flags for `cpus`: --cpu-range lo-hi when they run on, else -C with a hex
    mask (common/arg.cpp: -C/--cpu-mask M "arbitrarily long hex", -Cr/--cpu-range lo-hi)."""
    if not cpus:
        return []
    if list(cpus) == list(range(cpus[0], cpus[-1] + 1)):
        return ["--cpu-range", f"{cpus[0]}-{cpus[-1]}"]
    return ["-C", hex(sum(1 << cpu for cpu in cpus))]


def cores_problems(preset: Any) -> list[tuple[str, str, str]]:
    """(level, message, fix) for a thread count the preset's cpu_cores cannot seat."""
    if preset.cpu_cores and preset.threads > len(preset.cpu_cores):
        where = format_cpu_list(preset.cpu_cores)
        return [("warning", f"threads = {preset.threads} on cpu_cores {where}: {preset.threads} threads share "
                            f"{len(preset.cpu_cores)} CPUs and wait for each other at every step",
                 f"Set threads = {len(preset.cpu_cores)} (or 0: one per listed CPU), or list more CPUs")]
    return []
