"""Runs measured while the machine is quiet: other processes' CPU read from /proc, and a run measured
again while they take more than a tenth of a core or its decoded tokens were unsteady."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.core.engine.measured import RatesMeasured

QUIET_SHARE = 0.10  # other processes' CPU, in cores, above which a run is measured again
QUIET_TRIES = 3
# A run whose median decoded token took more than this times its fastest was slowed for part of it by
# what /proc does not show (the host of a virtual machine): on a quiet run here the ratio was 1.05-1.15,
# on one slowed run 1.43.
STEADY_RATIO = 1.25


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy ticks of every CPU, ticks of this process and its children) from /proc; None off Linux."""
    try:
        fields = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:9]
        busy = sum(int(x) for i, x in enumerate(fields) if i not in (3, 4))  # all but idle and iowait
        own, me = 0, os.getpid()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text(encoding="ascii", errors="replace")
            except OSError:
                continue
            rest = text[text.rfind(")") + 2:].split()  # after the command name: state, ppid, ...
            if int(stat.parent.name) == me or (len(rest) > 12 and rest[1] == str(me)):
                own += int(rest[11]) + int(rest[12])  # utime + stime
        return busy, own
    except (OSError, ValueError, IndexError):
        return None


def cpu_others(before: tuple[int, int] | None, after: tuple[int, int] | None, seconds: float) -> float:
    """Cores' worth of CPU that processes other than this one and its children (the engine) used
    between two _cpu_ticks() readings `seconds` apart; 0 when unknown."""
    if before is None or after is None or seconds <= 0:
        return 0.0
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / hz / seconds)


def _wait_quiet(wait_s: float, window_s: float = 0.25) -> None:
    """Return once other processes took at most QUIET_SHARE of a core over a window, or after wait_s."""
    deadline = time.perf_counter() + wait_s
    while time.perf_counter() < deadline:
        before, started = _cpu_ticks(), time.perf_counter()
        time.sleep(window_s)
        if cpu_others(before, _cpu_ticks(), time.perf_counter() - started) <= QUIET_SHARE:
            return


@dataclass
class RetryBudget:
    """The seconds that measuring runs again may take over many quiet_run calls (a probe keeps to its
    minute), and how many runs were kept disturbed once they were spent."""

    seconds: float
    kept_disturbed: int = 0


def quiet_run(measure: Callable[[], RatesMeasured], tries: int = QUIET_TRIES,
              clock: Callable[[], float] = time.perf_counter, wait_s: float = 0.0,
              budget: RetryBudget | None = None) -> tuple[RatesMeasured, float]:
    """Run `measure` until other processes took at most QUIET_SHARE of a core during it and its decodes
    were steady (at most `tries` times, each retry after up to `wait_s` for a quiet moment, and none once
    `budget` is spent); the least disturbed run, and how much of a core others took during it."""
    kept: tuple[RatesMeasured, float, float] | None = None
    for attempt in range(max(1, tries)):
        if attempt and budget is not None and budget.seconds <= 0:
            budget.kept_disturbed += 1
            break
        retry_started = clock() if attempt and budget is not None else 0.0
        if attempt and wait_s > 0:
            _wait_quiet(wait_s)
        before, started = _cpu_ticks(), clock()
        run = measure()
        others = cpu_others(before, _cpu_ticks(), clock() - started)
        if attempt and budget is not None:
            budget.seconds -= clock() - retry_started
        disturbance = _disturbance(run, others)
        if kept is None or disturbance < kept[2]:
            kept = (run, others, disturbance)
        if disturbance <= 1:
            break
    return kept[0], kept[1]


def _disturbance(run: RatesMeasured, others: float) -> float:
    """Above 1: other processes took more than QUIET_SHARE, or the median token over STEADY_RATIO x the fastest."""
    best = run.decode_best_seconds_per_token
    unsteady = run.decode_seconds_per_token / best / STEADY_RATIO if best > 0 else 0.0
    return max(others / QUIET_SHARE, unsteady)
