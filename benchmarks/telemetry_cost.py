"""CPU cost of one full telemetry sample on this machine and on each recorded tree (target < 1 ms), and of
writing it as a CSV log row and as Prometheus text (what `monitor --log` / `--prometheus` add per sample)."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from workbench.core.telemetry.memory import MemorySampler
from workbench.core.telemetry.metrics import exposition_text, sample_metrics
from workbench.core.telemetry.sample_log import SampleLog
from workbench.core.telemetry.sampler import Sampler

TREES = Path(__file__).resolve().parent.parent / "tests" / "sysfs"
TARGET_MS = 1.0


def cpu_ms_per_call(call, repeats: int) -> float:
    """CPU time (process_time: user + system of this process) per call, in ms."""
    call()  # first call pays for lazy imports and caches
    started = time.process_time()
    for _ in range(repeats):
        call()
    return (time.process_time() - started) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=2000, help="samples per root (default 2000)")
    args = parser.parse_args()
    roots: list[tuple[str, Path, int | None]] = [
        ("this machine (/)", Path("/"), None),
        ("/ + engine RSS/USS", Path("/"), os.getpid()),  # this process stands in for the engine
    ]
    roots += [(tree.name, tree, None) for tree in sorted(TREES.iterdir()) if (tree / "sys").is_dir()]
    psutil_ms = cpu_ms_per_call(MemorySampler().read, args.repeats)
    print(f"{args.repeats} samples per root; CPU time from time.process_time()")
    print(f"memory, swap and per-core CPU alone (this machine): {psutil_ms:.3f} ms")
    print(f"{'root':<22}{'ms/sample':>10}{'beyond mem+cpu':>15}{'x target':>10}  sources read")
    for label, root, pid in roots:
        sampler = Sampler(root, pid)
        full_ms = cpu_ms_per_call(sampler.sample, args.repeats)
        sample = sampler.sample()
        sources = (
            f"{len(sample.temperatures)} temps, {len(sample.clocks)} policies, {len(sample.power)} rails, "
            f"{len(sample.loads)} loads, {len(sample.unavailable)} unavailable"
        )
        print(f"{label:<22}{full_ms:>10.3f}{full_ms - psutil_ms:>15.3f}{full_ms / TARGET_MS:>10.2f}  {sources}")
        sampler.close()
    print(f"target: < {TARGET_MS} ms per sample (x target < 1.00); at 2 Hz that is < 0.2% of one core")
    sample = Sampler(TREES / "jetson-orin-nano").sample()
    with tempfile.TemporaryDirectory() as folder:
        csv_log = SampleLog(Path(folder) / "monitor.csv", keep=1)
        jsonl_log = SampleLog(Path(folder) / "monitor.jsonl", keep=1)
        costs = [
            ("CSV log row", cpu_ms_per_call(lambda: csv_log.write(sample), args.repeats)),
            ("JSON-lines log row", cpu_ms_per_call(lambda: jsonl_log.write(sample), args.repeats)),
            ("Prometheus scrape", cpu_ms_per_call(lambda: exposition_text(sample_metrics(sample)), args.repeats)),
        ]
    for label, ms in costs:
        print(f"{label:<22}{ms:>10.3f} ms (jetson-orin-nano tree sample), {ms / TARGET_MS:.2f} x the sample target")


if __name__ == "__main__":
    main()
