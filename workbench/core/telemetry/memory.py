"""System memory and swap (/proc/meminfo), per-core CPU load and the engine's RSS/USS (psutil)."""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from workbench.core.telemetry.sample import Unavailable

# psutil and /proc/meminfo describe the machine this runs on; they cannot be pointed at a
# recorded tree.


@dataclass(frozen=True)
class MemoryReading:
    mem_total_bytes: int
    mem_available_bytes: int
    swap_total_bytes: int
    swap_used_bytes: int
    cpu_percent: tuple[float, ...]
    engine_rss_bytes: int | None
    engine_uss_bytes: int | None
    unavailable: tuple[Unavailable, ...]


_MEMINFO_KEYS = (b"MemTotal:", b"MemAvailable:", b"SwapTotal:", b"SwapFree:")


def _meminfo() -> tuple[int, int, int, int]:
    """(total, available, swap total, swap free) in bytes from one read of /proc/meminfo.

    The same figures psutil.virtual_memory()/swap_memory() give, without swap_memory's
    parse of /proc/vmstat (swap-in/out counters not shown here), which is half a sample's cost.
    """
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            fields = {line.split()[0]: int(line.split()[1]) * 1024 for line in meminfo if line.startswith(_MEMINFO_KEYS)}
        return tuple(fields[key] for key in _MEMINFO_KEYS)  # type: ignore[return-value]
    except (OSError, KeyError, ValueError, IndexError):
        memory, swap = psutil.virtual_memory(), psutil.swap_memory()
        return memory.total, memory.available, swap.total, swap.total - swap.free


def _busy_and_total(times: object) -> tuple[float, float]:
    fields = times._asdict()  # type: ignore[attr-defined]
    # guest time is already counted in user time on Linux.
    total = sum(value for name, value in fields.items() if name not in ("guest", "guest_nice"))
    idle = fields.get("idle", 0.0) + fields.get("iowait", 0.0)
    return total - idle, total


class MemorySampler:
    """Keeps its own CPU-times baseline, so other psutil.cpu_percent() callers do not disturb it."""

    def __init__(self, engine_pid: int | None = None) -> None:
        self._previous = [_busy_and_total(times) for times in psutil.cpu_times(percpu=True)]
        self._process: psutil.Process | None = None
        self._engine_pid: int | None = None
        self.set_engine_pid(engine_pid)

    def set_engine_pid(self, pid: int | None) -> None:
        self._engine_pid = pid
        self._process = None
        if pid is not None:
            try:
                self._process = psutil.Process(pid)
            except psutil.Error:
                self._process = None

    def read(self) -> MemoryReading:
        total, available, swap_total, swap_free = _meminfo()
        rss, uss, unavailable = self._engine_memory()
        return MemoryReading(
            mem_total_bytes=total,
            mem_available_bytes=available,
            swap_total_bytes=swap_total,
            swap_used_bytes=swap_total - swap_free,
            cpu_percent=self._cpu_percent(),
            engine_rss_bytes=rss,
            engine_uss_bytes=uss,
            unavailable=unavailable,
        )

    def _cpu_percent(self) -> tuple[float, ...]:
        current = [_busy_and_total(times) for times in psutil.cpu_times(percpu=True)]
        percents = []
        for index, (busy, total) in enumerate(current):
            if index < len(self._previous) and total - self._previous[index][1] > 0:
                busy_before, total_before = self._previous[index]
                share = (busy - busy_before) / (total - total_before)
            else:
                # No clock tick since the last sample (or a core came online): the
                # since-boot share is the only honest figure for this core.
                share = busy / total if total > 0 else 0.0
            percents.append(round(min(max(share, 0.0), 1.0) * 100, 1))
        self._previous = current
        return tuple(percents)

    def _engine_memory(self) -> tuple[int | None, int | None, tuple[Unavailable, ...]]:
        if self._engine_pid is None:
            return None, None, ()
        if self._process is None:
            return None, None, (Unavailable("engine memory", f"engine process {self._engine_pid} not running"),)
        try:
            # USS comes from /proc/PID/smaps_rollup: one read, cheap on current kernels.
            info = self._process.memory_full_info()
        except psutil.AccessDenied:
            try:
                return self._process.memory_info().rss, None, (Unavailable("engine USS", "needs root"),)
            except psutil.Error:
                pass
        except psutil.Error:
            pass
        else:
            return info.rss, info.uss, ()
        return None, None, (Unavailable("engine memory", f"engine process {self._engine_pid} not running"),)
