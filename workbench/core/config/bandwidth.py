"""A sub-second memory-bandwidth probe for the host profile, cached per machine."""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import psutil

from workbench.core import paths
from workbench.core.files.json_file import write_json_replacing
from workbench.core.units import MIB

CACHE_FILE = "host_bandwidth.json"
# Raised whenever the probe's method changes: a figure cached by another method (an old
# single-threaded copy, a pass timed by a buggy clock) is measured again, not trusted forever.
PROBE_VERSION = 2
@dataclass(frozen=True)
class BandwidthMeasurement:
    """Memory read bandwidth of one machine with every core reading, as decode reads weights."""

    gbs: float  # 1e9 bytes per second read: threads x buffer bytes / best pass time
    buffer_mb: int  # per thread
    threads: int
    passes: int  # timed passes; the best one counts (the others met other processes' noise)
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
    ram_mb = psutil.virtual_memory().total // MIB
    return f"{platform.node()}|{platform.machine()}|{_cpu_model()}|{ram_mb} MB"


def measure_read_bandwidth(
    buffer_mb: int = 64, passes: int = 5, time_budget_s: float = 0.5, threads: int | None = None
) -> BandwidthMeasurement:
    """Every thread reduces its own `buffer_mb` array at once; keep the best pass.

    Decode reads every weight once per token with all of llama.cpp's threads, so the
    bound wants the aggregate *read* bandwidth. A single-threaded copy reads low on
    machines where one core cannot saturate the memory controller (here it gave a
    bound below the decode speed llama.cpp really reached). numpy's integer max is a
    SIMD loop that releases the GIL, so threads run in parallel; numpy comes with
    llama-cpp-python. 64 MB per thread is ten times the last-level cache of the boards
    this is for (2-6 MB); a large server L3 (32 MB here) still holds a part of it, so
    on such hosts the figure is a little high, never low.
    """
    import numpy as np  # deferred: importing numpy costs start-up time

    thread_count = threads or os.cpu_count() or 1
    size = buffer_mb * MIB
    arrays = [np.full(size // 8, index + 1, dtype=np.int64) for index in range(thread_count)]
    for array in arrays:
        array.max()  # first touch: page faults and cache warm-up, not bandwidth
    start_line = threading.Barrier(thread_count + 1)
    finish_line = threading.Barrier(thread_count + 1)
    spans: list[tuple[float, float]] = []  # (start, end) of each thread's read in this pass

    def read(array) -> None:
        while True:
            try:
                start_line.wait()
            except threading.BrokenBarrierError:
                return  # the probe is over
            begin = time.perf_counter()
            array.max()
            spans.append((begin, time.perf_counter()))
            finish_line.wait()

    workers = [threading.Thread(target=read, args=(array,), daemon=True) for array in arrays]
    for worker in workers:
        worker.start()
    best = float("inf")
    timed = 0
    started = time.perf_counter()
    try:
        for _ in range(passes):
            if timed and time.perf_counter() - started > time_budget_s:
                break
            spans.clear()
            start_line.wait()
            finish_line.wait()
            # The readers' own clocks: the main thread may wake long after they finished.
            best = min(best, max(end for _, end in spans) - min(begin for begin, _ in spans))
            timed += 1
    finally:
        start_line.abort()  # ends the workers, however many passes ran
        for worker in workers:
            worker.join()
    return BandwidthMeasurement(
        gbs=round(thread_count * size / best / 1e9, 2),
        buffer_mb=buffer_mb,
        threads=thread_count,
        passes=timed,
        best_seconds=best,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=machine_key(),
    )


def _probe_buffer_mb() -> int:
    """64 MB per thread, or less on a machine with little free memory."""
    available_mb = psutil.virtual_memory().available // MIB
    return max(16, min(64, available_mb // (8 * (os.cpu_count() or 1))))


def cache_path() -> Path:
    return paths.cache_dir() / CACHE_FILE


def _read_cache(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: measure again and rewrite it
    return data if isinstance(data, dict) else {}


def host_bandwidth(*, refresh: bool = False) -> BandwidthMeasurement:
    """This machine's read bandwidth: from the cache, or measured (< 1 s) and cached."""
    key = machine_key()
    path = cache_path()
    entries = _read_cache(path)
    cached = entries.get(key)
    if not refresh and isinstance(cached, dict) and cached.get("probe") == PROBE_VERSION:
        try:
            return replace(BandwidthMeasurement(**{k: v for k, v in cached.items() if k != "probe"}), from_cache=True)
        except TypeError:
            pass  # damaged entry: measure again
    measurement = measure_read_bandwidth(_probe_buffer_mb())
    entry = asdict(measurement)
    entry.pop("from_cache")
    entry["probe"] = PROBE_VERSION
    entries[key] = entry
    try:
        write_json_replacing(path, entries, indent=2)
    except OSError:
        pass  # a read-only cache only costs the next start another probe
    return measurement
