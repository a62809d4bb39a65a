"""This machine's CPUs as sysfs tells them (capacity, top clock, cluster, core type) and which are the fast ones."""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

# llama.cpp's CPU mask holds GGML_MAX_N_THREADS = 512 CPUs (ggml/include/ggml.h; common/common.cpp
# parse_cpu_range refuses an index past it), so no CPU number above 511 can be pinned.
MAX_CPUS = 512
_CPU_DIR = "sys/devices/system/cpu"
_MAX_FILE_BYTES = 4096  # a sysfs attribute is one page at most
_MAX_LIST_TEXT = 4096
# The kernel scales capacity so the fastest CPU is SCHED_CAPACITY_SCALE = 1024 (include/linux/sched.h).
_CAPACITY_SCALE = 1024
_MIN_KHZ, _MAX_KHZ = 1_000, 20_000_000  # 1 MHz .. 20 GHz: outside it a clock is a broken file
# A CPU is slow when the scheduler would not fit the fastest CPU's work on it: kernel/sched/fair.c
# fits_capacity(cap, max) is cap * 1280 < max * 1024, i.e. below 80% of the fastest.
_FIT_NUMERATOR, _FIT_DENOMINATOR = 1024, 1280
_NO_ID = 65535  # topology/cluster_id when the firmware names no cluster (-1 as an unsigned 16-bit value)

# Arm Ltd. (implementer 0x41) core part numbers from MIDR_EL1, as in the kernel's
# arch/arm64/include/asm/cputype.h (ARM_CPU_PART_CORTEX_*).
_ARM_PARTS = {
    0xD03: "Cortex-A53", 0xD04: "Cortex-A35", 0xD05: "Cortex-A55", 0xD07: "Cortex-A57", 0xD08: "Cortex-A72",
    0xD09: "Cortex-A73", 0xD0A: "Cortex-A75", 0xD0B: "Cortex-A76", 0xD0C: "Neoverse-N1", 0xD0D: "Cortex-A77",
    0xD0E: "Cortex-A76AE", 0xD41: "Cortex-A78", 0xD42: "Cortex-A78AE", 0xD44: "Cortex-X1", 0xD46: "Cortex-A510",
    0xD47: "Cortex-A710", 0xD48: "Cortex-X2", 0xD4B: "Cortex-A78C", 0xD4D: "Cortex-A715", 0xD4E: "Cortex-X3",
    0xD80: "Cortex-A520", 0xD81: "Cortex-A720", 0xD82: "Cortex-X4",
}
_ARM_IMPLEMENTER = 0x41
_MIDR = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
_NUMBER = re.compile(r"^[0-9]{1,12}$")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses

Reader = Callable[[Path], str]  # a path's text, or OSError; tests pass one that fails as they need


def read_small(path: Path) -> str:
    """The text of a small regular file, opened without blocking (a FIFO planted in a tree never hangs)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file: {path}")
        data = os.read(fd, _MAX_FILE_BYTES)
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").strip().strip("\x00").strip()


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """"0-3,6" (the kernel's cpulist form) or "0 1 2 3" (related_cpus) -> (0, 1, 2, 3, 6); ValueError if malformed.

    Every number must be below MAX_CPUS, so an absurd range never becomes a huge list.
    """
    if len(text) > _MAX_LIST_TEXT:
        raise ValueError(f"a CPU list of {len(text)} characters")
    cpus: set[int] = set()
    for part in text.replace(",", " ").split():
        first, dash, last = part.partition("-")
        if not _NUMBER.match(first) or (dash and not _NUMBER.match(last)):
            raise ValueError(f'"{part}" is neither a CPU number nor a range like 4-7')
        low, high = int(first), int(last) if dash else int(first)
        if low > high:
            raise ValueError(f'the range "{part}" runs backwards')
        if high >= MAX_CPUS:
            raise ValueError(f"CPU {high} is past the {MAX_CPUS} CPUs llama.cpp can pin")
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))


def format_cpu_list(cpus: Iterable[int]) -> str:
    """(0, 1, 2, 3, 6) -> "0-3,6"."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


@dataclass(frozen=True)
class CpuInfo:
    """One online CPU; None where sysfs does not say (or says something that cannot be true)."""

    cpu: int
    capacity: int | None = None  # cpu_capacity: the kernel's scale, 1024 = the fastest CPU
    max_freq_khz: int | None = None  # cpufreq cpuinfo_max_freq: the hardware's top clock
    cluster: int | None = None  # topology/cluster_id
    core_siblings: tuple[int, ...] = ()  # topology/thread_siblings_list: the CPUs of its physical core
    part: str = ""  # the core type from MIDR_EL1 ("Cortex-A76"), "" where not an Arm core or not exposed


@dataclass(frozen=True)
class CpuTopology:
    """The online CPUs, which of them are fast, and the sentence that says why."""

    cpus: tuple[CpuInfo, ...]
    fast: tuple[int, ...]  # the fast CPUs; every CPU on a machine whose cores are all alike
    heterogeneous: bool  # big and little cores: llama.cpp should run on the fast ones only
    basis: str  # "cpu_capacity", "cpuinfo_max_freq" or "" (nothing to tell the cores apart)
    reason: str  # one sentence: which cores are fast and what says so
    problems: tuple[str, ...] = ()  # files that were there but could not be used, and why

    @property
    def fast_cores(self) -> int:
        """Physical cores among the fast CPUs (SMT siblings count once)."""
        return _physical_cores([cpu for cpu in self.cpus if cpu.cpu in self.fast])

    @property
    def all_cpus(self) -> tuple[int, ...]:
        return tuple(cpu.cpu for cpu in self.cpus)


def _physical_cores(cpus: list[CpuInfo]) -> int:
    return len({cpu.core_siblings or (cpu.cpu,) for cpu in cpus})


class _Reads:
    """Bounded reads under one root; a file that is there but unusable is kept as a problem, never a crash."""

    def __init__(self, root: Path, reader: Reader) -> None:
        self.base = root / _CPU_DIR
        self.reader = reader
        self.problems: list[str] = []

    def text(self, relative: str) -> str | None:
        path = self.base / relative
        try:
            return self.reader(path)
        except FileNotFoundError:
            return None
        except OSError as error:
            self.problems.append(f"{path}: cannot be read ({error.strerror or error})")
            return None

    def number(self, relative: str, low: int, high: int) -> int | None:
        text = self.text(relative)
        if text is None:
            return None
        if not _NUMBER.match(text) or not low <= int(text) <= high:
            self.problems.append(f"{self.base / relative}: {text[:24]!r} is not a value from {low} to {high}")
            return None
        return int(text)

    def cpus(self, relative: str) -> tuple[int, ...] | None:
        text = self.text(relative)
        if text is None:
            return None
        try:
            return parse_cpu_list(text)
        except ValueError as error:
            self.problems.append(f"{self.base / relative}: {error}")
            return None


def read_cpu_topology(root: Path | str = "/", *, reader: Reader = read_small) -> CpuTopology:
    """The CPUs under `root` (a filesystem root: "/" or a recorded tree) and which of them are fast."""
    reads = _Reads(Path(root), reader)
    policy_freqs = _policy_max_freqs(reads)
    online = reads.cpus("online")
    if online is None:  # no `online` file: the cpuN folders, else the CPUs the cpufreq policies name
        online = _listed_cpus(reads.base) or tuple(sorted(policy_freqs))
    cpus = tuple(_cpu_info(reads, cpu, policy_freqs.get(cpu)) for cpu in online)
    return choose_fast(cpus, tuple(reads.problems))


def _listed_cpus(base: Path) -> tuple[int, ...]:
    try:
        names = [entry.name for entry in os.scandir(base) if re.fullmatch(r"cpu[0-9]{1,4}", entry.name)]
    except OSError:
        return ()
    return tuple(sorted(cpu for cpu in (int(name[3:]) for name in names) if cpu < MAX_CPUS))


def _policy_max_freqs(reads: _Reads) -> dict[int, int]:
    """CPU -> cpuinfo_max_freq from cpufreq/policy*/ (one file per cluster on Arm boards)."""
    freqs: dict[int, int] = {}
    try:
        policies = sorted(entry.name for entry in os.scandir(reads.base / "cpufreq")
                          if re.fullmatch(r"policy[0-9]{1,4}", entry.name))[:MAX_CPUS]
    except OSError:
        return freqs
    for policy in policies:
        related = reads.cpus(f"cpufreq/{policy}/related_cpus")
        khz = reads.number(f"cpufreq/{policy}/cpuinfo_max_freq", _MIN_KHZ, _MAX_KHZ)
        if related and khz is not None:
            freqs.update(dict.fromkeys(related, khz))
    return freqs


def _cpu_info(reads: _Reads, cpu: int, policy_khz: int | None) -> CpuInfo:
    own = f"cpu{cpu}"
    khz = policy_khz
    if khz is None:
        khz = reads.number(f"{own}/cpufreq/cpuinfo_max_freq", _MIN_KHZ, _MAX_KHZ)
    # No cluster reads 65535 (-1 as u16) on current kernels and -1 on older ones: both are "unknown".
    cluster = None if reads.text(f"{own}/topology/cluster_id") == "-1" else reads.number(
        f"{own}/topology/cluster_id", 0, _NO_ID)
    siblings = reads.cpus(f"{own}/topology/thread_siblings_list") or ()
    return CpuInfo(
        cpu=cpu,
        capacity=reads.number(f"{own}/cpu_capacity", 1, _CAPACITY_SCALE),
        max_freq_khz=khz,
        cluster=None if cluster == _NO_ID else cluster,
        core_siblings=siblings if cpu in siblings else (),
        part=_part_name(reads.text(f"{own}/regs/identification/midr_el1")),
    )


def _part_name(midr: str | None) -> str:
    if midr is None or not _MIDR.match(midr):
        return ""
    value = int(midr, 16)
    if (value >> 24) & 0xFF != _ARM_IMPLEMENTER:
        return ""
    return _ARM_PARTS.get((value >> 4) & 0xFFF, "")


def choose_fast(cpus: tuple[CpuInfo, ...], problems: tuple[str, ...] = ()) -> CpuTopology:
    """Which CPUs are fast: by cpu_capacity where it tells them apart, else by cpuinfo_max_freq.

    A CPU below 80% of the fastest (the scheduler's own fits_capacity margin) is a little
    core. Capacity comes first because the kernel folds each core type's speed per MHz (the
    device tree's capacity-dmips-mhz) and its top clock into it; where the device tree gives
    no capacity-dmips-mhz every CPU reads 1024, so the top clock is asked next.
    """
    if not cpus:
        return CpuTopology((), (), False, "", "no CPUs listed under /sys/devices/system/cpu", problems)
    for basis in ("cpu_capacity", "cpuinfo_max_freq"):
        values = [_value(cpu, basis) for cpu in cpus]
        if not all(values):
            continue  # a CPU that does not say: this basis cannot tell the cores apart
        top = max(values)
        fast = tuple(cpu.cpu for cpu, v in zip(cpus, values) if v * _FIT_DENOMINATOR >= top * _FIT_NUMERATOR)
        if len(fast) < len(cpus):
            return CpuTopology(cpus, fast, True, basis, _fast_reason(cpus, fast, basis), problems)
    # Within 20% of each other on every basis: one core type (a binned cluster is not a little core).
    basis = _common_basis(cpus)
    return CpuTopology(cpus, tuple(cpu.cpu for cpu in cpus), False, basis, _alike_reason(cpus, basis), problems)


def _common_basis(cpus: tuple[CpuInfo, ...]) -> str:
    if all(cpu.capacity is not None for cpu in cpus):
        return "cpu_capacity"
    if all(cpu.max_freq_khz is not None for cpu in cpus):
        return "cpuinfo_max_freq"
    return ""


def _figure(cpu: CpuInfo, basis: str) -> str:
    if basis == "cpu_capacity":
        return f"capacity {cpu.capacity}"
    return f"{(cpu.max_freq_khz or 0) / 1e6:.2f} GHz"


def _group_text(cpus: list[CpuInfo], basis: str) -> str:
    """"4 x Cortex-A76 (CPUs 4-7, capacity 1024)" with each distinct figure once."""
    parts = sorted({cpu.part for cpu in cpus if cpu.part})
    kind = f"{len(cpus)} x {'/'.join(parts)}" if parts else f"{len(cpus)} CPUs"
    figures = ", ".join(dict.fromkeys(_figure(cpu, basis) for cpu in sorted(cpus, key=lambda c: -_value(c, basis))))
    return f"{kind} (CPUs {format_cpu_list(cpu.cpu for cpu in cpus)}, {figures})"


def _value(cpu: CpuInfo, basis: str) -> int:
    return (cpu.capacity if basis == "cpu_capacity" else cpu.max_freq_khz) or 0


def _fast_reason(cpus: tuple[CpuInfo, ...], fast: tuple[int, ...], basis: str) -> str:
    quick = [cpu for cpu in cpus if cpu.cpu in fast]
    slow = [cpu for cpu in cpus if cpu.cpu not in fast]
    return (f"big and little cores: {_group_text(quick, basis)} are fast, {_group_text(slow, basis)} are below "
            f"80% of them by /sys/devices/system/cpu {'cpu*/cpu_capacity' if basis == 'cpu_capacity' else 'cpufreq cpuinfo_max_freq'}; "
            "llama.cpp waits for its slowest thread at every step, so it runs on the fast ones only")


def _alike_reason(cpus: tuple[CpuInfo, ...], basis: str) -> str:
    if not basis:
        return f"{len(cpus)} CPUs, none exposing cpu_capacity or cpuinfo_max_freq: taken as alike"
    return f"all cores alike: {_group_text(list(cpus), basis)}"


@functools.lru_cache(maxsize=1)
def host_cpu_topology() -> CpuTopology:
    """This machine's topology, read once per process (CPUs do not change type while it runs)."""
    return read_cpu_topology("/")
