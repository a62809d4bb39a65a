"""Pinning every thread of the engine process to the CPUs a preset runs on (os.sched_setaffinity)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from workbench.core.config.cpu_topology import format_cpu_list
from workbench.core.config.preset import Preset
from workbench.core.config.preset_cores import core_choice

_TASKS = "/proc/self/task"


@dataclass(frozen=True)
class Pinning:
    """What the engine runs on after a load: its threads, the CPUs it is pinned to, why, and any trouble."""

    threads: int
    cpus: tuple[int, ...]  # () = not pinned: every CPU the engine was started with
    reason: str
    warning: str = ""


def set_affinity_all_threads(cpus: set[int]) -> None:
    """sched_setaffinity for each thread of this process: a thread keeps the mask it had when it was
    made, so pinning only the calling thread would leave a thread pool made by an earlier load behind."""
    try:
        threads = [int(name) for name in os.listdir(_TASKS) if name.isdigit()]
    except OSError:
        threads = [0]
    for thread in threads or [0]:
        try:
            os.sched_setaffinity(thread, cpus)
        except ProcessLookupError:
            pass  # the thread ended between the listing and now


def pin_engine(preset: Preset, started_on: frozenset[int]) -> Pinning:
    """Pin this process to the CPUs `preset` runs on, or give it back every CPU it started with.

    `started_on` is the engine's affinity when it started (a container's cpuset, `taskset`):
    pinning never reaches past it. A choice outside it, or a refusal by the kernel, leaves
    the engine unpinned with a warning; the load goes on.
    """
    choice = core_choice(preset)
    wanted = set(choice.cpus) & started_on
    warning = ""
    if choice.cpus and not wanted:
        warning = (f"not pinned: CPUs {format_cpu_list(choice.cpus)} are outside the CPUs this engine may use "
                   f"({format_cpu_list(started_on)})")
    target = wanted or set(started_on)
    try:
        set_affinity_all_threads(target)
    except OSError as error:
        warning = f"not pinned to CPUs {format_cpu_list(target)}: {error.strerror or error}"
        target = set(started_on)
        try:
            set_affinity_all_threads(target)
        except OSError:
            pass  # the kernel refuses even the engine's own start mask: leave each thread as it is
    pinned = tuple(sorted(target)) if wanted and not warning else ()
    return Pinning(choice.threads, pinned, choice.reason, warning)
