"""The host bandwidth probe (every thread reading) beside one thread reading, and its cost.

Run: python benchmarks/bandwidth_probe.py [--buffer-mb 64] [--rounds 3]
Prints, per round, the probe's aggregate read GB/s, the same probe with one thread, their
ratio (what a single-threaded probe would have under-stated the decode bound by) and the
probe's wall time including buffer setup (what a cold cache adds to the app's start).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    from workbench.core.config.bandwidth import measure_read_bandwidth

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffer-mb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'round':>5}  {'all threads GB/s':>16}  {'1 thread GB/s':>13}  {'ratio':>5}  {'probe wall s':>12}")
    for round_number in range(1, args.rounds + 1):
        started = time.perf_counter()
        probe = measure_read_bandwidth(buffer_mb=args.buffer_mb)
        wall = time.perf_counter() - started
        single = measure_read_bandwidth(buffer_mb=args.buffer_mb, threads=1)
        print(f"{round_number:>5}  {probe.gbs:16.2f}  {single.gbs:13.2f}  {probe.gbs / single.gbs:5.2f}  {wall:12.3f}"
              f"   ({probe.threads} threads)")


if __name__ == "__main__":
    main()
