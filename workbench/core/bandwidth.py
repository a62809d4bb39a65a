"""A sub-second memory-bandwidth probe for the host profile, cached per machine."""

from __future__ import annotations

import json
import mmap
import os
import platform
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from workbench.core import paths

CACHE_FILE = "host_bandwidth.json"
_MIB = 1 << 20


@dataclass(frozen=True)
class BandwidthMeasurement:
    """Memory copy bandwidth of one machine, counted as STREAM Copy counts it (read + write)."""

    gbs: float  # 1e9 bytes per second moved: 2 x buffer bytes per copy / best copy time
    buffer_mb: int
    copies: int  # timed copies; the best one counts (the others met other processes' noise)
    best_seconds: float
    measured_at: str  # ISO 8601, UTC
    machine: str  # the cache key: host name, architecture, CPU model, RAM
    from_cache: bool = False


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_key() -> str:
    """Names this machine for the cache: a different board (or more RAM) measures anew."""
    import psutil

    ram_mb = psutil.virtual_memory().total // _MIB
    return f"{platform.node()}|{platform.machine()}|{_cpu_model()}|{ram_mb} MB"


def _buffer(size: int) -> bytearray | mmap.mmap:
    """`size` writable bytes whose pages already exist.

    On Linux an anonymous map with MAP_POPULATE gets its pages in one kernel call; a
    bytearray faults them in one by one, which on a busy VM costs more than the probe.
    """
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate:
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    return bytearray(size)


def measure_copy_bandwidth(buffer_mb: int = 64, copies: int = 5, time_budget_s: float = 0.4) -> BandwidthMeasurement:
    """Copy a `buffer_mb` buffer `copies` times (within `time_budget_s`) and keep the best.

    64 MB is ten times the last-level cache of the boards this is for (2-6 MB), so the
    copy streams through DRAM; a larger buffer gave the same figure here at twice the time. The copy
    is a `memoryview` slice assignment, which CPython does with one memmove, so numpy is
    not needed. It is single-threaded: where one core cannot saturate the memory
    controller it reads low, so it is a floor for what llama.cpp's threads can pull,
    not the datasheet peak.
    """
    size = buffer_mb * _MIB
    source, target = _buffer(size), _buffer(size)
    source_view, target_view = memoryview(source), memoryview(target)
    chunk = min(size, _MIB)
    source_view[:chunk] = b"\x5a" * chunk  # real data: an untouched page reads as the one shared zero page
    for offset in range(chunk, size, chunk):
        source_view[offset:offset + chunk] = source_view[:chunk]
    target_view[:] = source_view  # first write to the target: page faults, not bandwidth
    best = float("inf")
    timed = 0
    started = time.perf_counter()
    while timed < copies and (timed == 0 or time.perf_counter() - started < time_budget_s):
        begin = time.perf_counter()
        target_view[:] = source_view
        best = min(best, time.perf_counter() - begin)
        timed += 1
    source_view.release()
    target_view.release()
    for buffer in (source, target):
        if isinstance(buffer, mmap.mmap):
            buffer.close()
    return BandwidthMeasurement(
        gbs=round(2 * size / best / 1e9, 2),
        buffer_mb=buffer_mb,
        copies=timed,
        best_seconds=best,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=machine_key(),
    )


def _probe_buffer_mb() -> int:
    """64 MB, or less on a machine with little free memory (the probe holds two buffers)."""
    import psutil

    available_mb = psutil.virtual_memory().available // _MIB
    return max(16, min(64, available_mb // 8))


def cache_path() -> Path:
    return paths.cache_dir() / CACHE_FILE


def _read_cache(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: measure again and rewrite it
    return data if isinstance(data, dict) else {}


def host_bandwidth(*, refresh: bool = False) -> BandwidthMeasurement:
    """This machine's copy bandwidth: from the cache, or measured (< 1 s) and cached."""
    key = machine_key()
    path = cache_path()
    entries = _read_cache(path)
    if not refresh and isinstance(entries.get(key), dict):
        try:
            return replace(BandwidthMeasurement(**entries[key]), from_cache=True)
        except TypeError:
            pass  # written by another version: measure again
    measurement = measure_copy_bandwidth(_probe_buffer_mb())
    entry = asdict(measurement)
    entry.pop("from_cache")
    entries[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(entries, indent=2), encoding="utf-8")
        temporary.replace(path)
    except OSError:
        pass  # a read-only cache only costs the next start another probe
    return measurement
