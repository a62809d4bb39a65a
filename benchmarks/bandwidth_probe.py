"""The host bandwidth probe side by side with numpy's copy of the same buffer size, and its cost.

Run: python benchmarks/bandwidth_probe.py [--buffer-mb 64] [--rounds 3]
Prints, per round, the probe's GB/s (memoryview copy, read + write bytes counted), numpy's
GB/s for `np.copyto` of the same size, their ratio, and the probe's wall time including
buffer setup (the number that matters for app start when the cache is cold).
"""

from __future__ import annotations

import argparse
import time


def numpy_copy_gbs(buffer_mb: int, copies: int) -> float | None:
    try:
        import numpy as np
    except ImportError:
        return None
    size = buffer_mb << 20
    source = np.full(size, 0x5A, dtype=np.uint8)
    target = np.empty_like(source)
    np.copyto(target, source)  # page faults first, as the probe does
    best = float("inf")
    for _ in range(copies):
        begin = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - begin)
    return 2 * size / best / 1e9


def main() -> None:
    from workbench.core.bandwidth import measure_copy_bandwidth

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffer-mb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'round':>5}  {'probe GB/s':>10}  {'numpy GB/s':>10}  {'probe/numpy':>11}  {'probe wall s':>12}")
    for round_number in range(1, args.rounds + 1):
        started = time.perf_counter()
        probe = measure_copy_bandwidth(buffer_mb=args.buffer_mb)
        wall = time.perf_counter() - started
        numpy_gbs = numpy_copy_gbs(args.buffer_mb, probe.copies)
        numpy_text = f"{numpy_gbs:10.2f}" if numpy_gbs else f"{'no numpy':>10}"
        ratio = f"{probe.gbs / numpy_gbs:11.2f}" if numpy_gbs else f"{'-':>11}"
        print(f"{round_number:>5}  {probe.gbs:10.2f}  {numpy_text}  {ratio}  {wall:12.3f}")


if __name__ == "__main__":
    main()
