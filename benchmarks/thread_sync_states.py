"""How steady this machine's cost per token is at 1 and 2 threads, sampled over time: the probe's 16-layer
fixed-cost model, whose decode is nearly all per-op cost (at 2 threads, the threads' barrier after each op).

Run: python benchmarks/thread_sync_states.py [--seconds 120] [--gap 0.5]

Every --gap seconds, one run of 64 decodes at 1 thread and then one at 2 threads, each the median token;
/proc/stat's steal time summed over the runs (the hypervisor's own count of time it ran something else).
Prints the quartiles of each column and how the 2-thread medians fall into bands around the fastest: on a
virtual machine whose host moves its vCPUs, the 2-thread cost jumps between levels from one second to the
next while the 1-thread cost stays put; a prediction made from one moment then meets a measurement from
another (benchmarks/speed_prediction.py's 2-thread rows). Then the mean and the median token over
successive windows of 5, 10 and 30 s: how far a figure averaged over a window of that length moves.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from workbench.core.bench.probe_models import FIXED_COST_MODELS, write_probe_model
from workbench.core.config.preset import Preset
from workbench.core.engine.client import EngineClient

N_GEN = 64
WINDOWS_S = (5.0, 10.0, 30.0)  # the mean and median token over successive windows of this length
BANDS = (1.15, 1.5)  # a 2-thread median within 15% of the fastest, up to 1.5x, and beyond


def _steal() -> int:
    """The steal jiffies summed over every CPU, from /proc/stat's "cpu" line (its 8th value)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0


def _quartiles(values: list[float]) -> str:
    ordered = sorted(values)
    at = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.0, 0.25, 0.5, 0.75)] + [ordered[-1]]
    return "  ".join(f"{value:7.1f}" for value in at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--gap", type=float, default=0.5)
    args = parser.parse_args()
    one, two, steal = [], [], 0
    with tempfile.TemporaryDirectory(prefix="sync-states-") as folder, EngineClient() as engine:
        path = write_probe_model(Path(folder) / "fixed.gguf", FIXED_COST_MODELS[1])
        engine.load_blocking(path, Preset(name="states", ctx_size=512, threads=2, batch_size=32, ubatch_size=32),
                             allow_overbudget=True)
        engine.run_op("rates", threads=2, depth=0, n_prompt=8, n_gen=16, repeats=1)  # warm-up
        ends = time.monotonic() + args.seconds
        while time.monotonic() < ends:
            before = _steal()
            for threads, column in ((1, one), (2, two)):
                run = engine.run_op("rates", threads=threads, depth=0, n_prompt=8, n_gen=N_GEN, repeats=1)
                column.append(run.decode_seconds_per_token * 1e6)
            steal += _steal() - before
            time.sleep(args.gap)
    print(f"{len(two)} samples over {args.seconds:.0f} s of {FIXED_COST_MODELS[1].name} "
          f"({N_GEN} decodes each, the median token, us)")
    print(f"{'':10} {'min':>7}  {'25%':>7}  {'median':>7}  {'75%':>7}  {'max':>7}")
    print(f"{'1 thread':10} {_quartiles(one)}")
    print(f"{'2 threads':10} {_quartiles(two)}")
    fastest = min(two)
    low, high = (fastest * band for band in BANDS)
    counts = (sum(v <= low for v in two), sum(low < v <= high for v in two), sum(v > high for v in two))
    print(f"2-thread medians within {BANDS[0]:.2f}x of the fastest ({fastest:.1f} us): {counts[0] / len(two):.0%}; "
          f"{BANDS[0]:.2f}-{BANDS[1]:.2f}x: {counts[1] / len(two):.0%}; over {BANDS[1]:.2f}x: {counts[2] / len(two):.0%}")
    print(f"1-thread medians within {BANDS[0]:.2f}x of their fastest: "
          f"{sum(v <= min(one) * BANDS[0] for v in one) / len(one):.0%}; steal time over the samples: {steal} jiffies")

    per_second = len(two) / args.seconds
    for window_s in WINDOWS_S:
        size = max(1, round(window_s * per_second))
        for label, column in (("1 thread", one), ("2 threads", two)):
            chunks = [column[i:i + size] for i in range(0, len(column) - size + 1, size)]
            means = [sum(chunk) / size for chunk in chunks]
            medians = [sorted(chunk)[size // 2] for chunk in chunks]
            if means:
                print(f"{window_s:>4.0f} s windows ({len(means)}), {label:<9}: mean {min(means):6.1f}-{max(means):6.1f}"
                      f" ({max(means) / min(means):.2f}x), median {min(medians):6.1f}-{max(medians):6.1f}"
                      f" ({max(medians) / min(medians):.2f}x)")


if __name__ == "__main__":
    main()
