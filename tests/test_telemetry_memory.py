"""Memory, swap, per-core CPU and the engine process's RSS/USS on this machine (psutil)."""

import subprocess
import sys

import psutil

from workbench.core.telemetry.memory import MemorySampler


def test_system_memory_and_cpu_of_this_machine():
    reading = MemorySampler().read()
    assert reading.mem_total_bytes == psutil.virtual_memory().total
    assert 0 < reading.mem_available_bytes <= reading.mem_total_bytes
    assert reading.swap_total_bytes == psutil.swap_memory().total
    assert 0 <= reading.swap_used_bytes <= reading.swap_total_bytes
    assert len(reading.cpu_percent) == psutil.cpu_count()
    assert all(0.0 <= percent <= 100.0 for percent in reading.cpu_percent)
    assert (reading.engine_rss_bytes, reading.engine_uss_bytes, reading.unavailable) == (None, None, ())


def test_engine_process_rss_and_uss():
    # A child that holds 64 MiB it has written to: its USS must include them.
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; b = bytearray(64 << 20); b[::4096] = b'x' * (len(b) // 4096); "
         "print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        sampler = MemorySampler()
        sampler.set_engine_pid(child.pid)
        reading = sampler.read()
        assert reading.engine_uss_bytes >= 64 << 20
        assert reading.engine_rss_bytes >= reading.engine_uss_bytes
    finally:
        child.stdin.close()
        child.wait(timeout=10)
    gone = sampler.read()
    assert gone.engine_rss_bytes is None
    assert [(item.what, item.why) for item in gone.unavailable] == [
        ("engine memory", f"engine process {child.pid} not running")
    ]


def test_a_pid_that_never_existed():
    sampler = MemorySampler(engine_pid=2**22 + 12345)
    assert sampler.read().unavailable[0].why == f"engine process {2**22 + 12345} not running"
