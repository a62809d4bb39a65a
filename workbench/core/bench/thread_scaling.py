"""A bound on the prefill FLOP/s the probe fits at more threads: no faster than the threads' share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from workbench.core.config.preset import ThreadRates

# How far past linear scaling a type's fitted prefill FLOP/s may go before it is bounded. A prompt's matrix
# products spread over the threads at best; a fit past that is what the elementwise cost, subtracted from the
# rate model's prompt, left too small. Of 48 fits at 2 threads on this 2-core machine (12 probes, 4 types),
# 8 came out 2.6-13x the 1-thread figure (Q6_K 2,663 GFLOP/s against 205, Q8_0 414 against 79), 2 at
# 2.33-2.37x and the other 38 at 0.74-2.21x.
SCALING_MARGIN = 1.15


def bounded_by_fewer_threads(rates: Sequence[ThreadRates]) -> tuple[tuple[ThreadRates, ...], tuple[str, ...]]:
    """`rates` (one per thread count), fewest threads first, with each type's prefill FLOP/s at n threads at most
    SCALING_MARGIN x n/m times its figure at m threads, m the next lower count measured; and a line per figure
    that was bounded."""
    bounded: list[ThreadRates] = []
    notes: list[str] = []
    for rate in sorted(rates, key=lambda r: r.threads):
        below = bounded[-1] if bounded else None
        if below is None or not below.prefill_gflops:
            bounded.append(rate)
            continue
        fewer = dict(below.prefill_gflops)
        table = []
        for kind, gflops in rate.prefill_gflops:
            limit = fewer.get(kind, 0.0) * SCALING_MARGIN * rate.threads / below.threads
            if limit and gflops > limit:
                notes.append(f"{kind} at {rate.threads} threads: {gflops:,.0f} fitted, bounded to {limit:,.0f} "
                             f"({SCALING_MARGIN:g} x {rate.threads}/{below.threads} x its {fewer[kind]:,.0f} at "
                             f"{below.threads})")
                gflops = round(limit, 3)
            table.append((kind, gflops))
        bounded.append(replace(rate, prefill_gflops=tuple(table)))
    return tuple(bounded), tuple(notes)
