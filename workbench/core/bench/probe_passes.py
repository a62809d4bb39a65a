"""The probe's models timed more than once: which pass counts, what order they are timed in, and how far the passes moved."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from workbench.core.bench.probe_models import CACHED_MODEL, FIXED_COST_MODELS, RATE_MODELS, ProbeModel, unmapped_model
from workbench.core.bench.quiet_runs import QUIET_SHARE, STEADY_RATIO
from workbench.core.config.preset import ThreadRates
from workbench.core.engine.measured import RatesMeasured
from workbench.core.ledger.speed_costs import ModelCosts
from workbench.core.units import threads_text

# A figure whose passes moved further apart than this: the machine moved during the probe (a steady one
# kept them within about 1.1x here; this virtual machine's 2-thread cost per op sat on levels 1.35x and 2x apart).
MOVED_RATIO = 1.3


@dataclass(frozen=True)
class ProbeRun:
    """One probe model's costs and its runs at one thread count: at depth 0 and, for some, at DEPTH."""

    costs: ModelCosts
    flat: RatesMeasured
    deep: RatesMeasured | None = None


def median_pass(small: Sequence[ProbeRun], deep: Sequence[ProbeRun]) -> tuple[ProbeRun, ProbeRun]:
    """The fixed-cost pair from its passes: decode as in the pass whose decode difference (deep less small) is
    the median, prefill as in the pass whose prefill difference is. A pass times its two models back to back,
    so a difference never mixes two moments of the machine. What the depth added to a model's decode and to
    its prompt (attention: device_probe._attention) is likewise the median over the passes of each pass's own
    addition: at 2 threads the 16-layer model's was a third of its token here (0.34 ms at depth 0), and three
    timings of it gave 0.05, 0.19 and 0.20 ms, so one pass chosen for its depth-0 difference is no measure."""
    def middle(difference: Callable[[int], float]) -> int:
        return sorted(range(len(small)), key=difference)[len(small) // 2]

    decode = middle(lambda i: deep[i].flat.decode_seconds_per_token - small[i].flat.decode_seconds_per_token)
    prefill = middle(lambda i: deep[i].flat.prefill_seconds - small[i].flat.prefill_seconds)

    def merged(runs: Sequence[ProbeRun]) -> ProbeRun:
        chosen, prompts = runs[decode], runs[prefill]
        flat = replace(chosen.flat, prefill_seconds=prompts.flat.prefill_seconds)
        if not all(run.deep for run in runs):
            return ProbeRun(chosen.costs, flat, chosen.deep)

        def added(part: str) -> float:  # what the depth added to `part`, in the pass of the median addition
            return sorted(getattr(run.deep, part) - getattr(run.flat, part) for run in runs)[len(runs) // 2]

        at_depth = replace(chosen.deep, decode_seconds_per_token=flat.decode_seconds_per_token
                           + added("decode_seconds_per_token"),
                           prefill_seconds=flat.prefill_seconds + added("prefill_seconds"))
        return ProbeRun(chosen.costs, flat, at_depth)

    return merged(small), merged(deep)


def median_run(runs: Sequence[ProbeRun]) -> ProbeRun:
    """Of a model's passes, the one of the median decode: the solve reads its figures from it."""
    return sorted(runs, key=lambda run: run.flat.decode_seconds_per_token)[len(runs) // 2]


def _rate_range(rate: float | None, runs: Sequence[ProbeRun]) -> tuple[float, float] | tuple[()]:
    """The lowest and highest Q8_0 read rate over `runs`, the passes of one model whose median_run the solve
    read `rate` from: each pass's decode less what the solve put beside the model's Q8_0 bytes."""
    if not rate or not runs:
        return ()
    middle = median_run(runs)
    own = dict(middle.costs.decode_bytes).get("Q8_0", 0)
    beside = middle.flat.decode_seconds_per_token - own / (rate * 1e9)
    moved = [own / (run.flat.decode_seconds_per_token - beside) / 1e9 for run in runs
             if run.flat.decode_seconds_per_token > beside]
    return (min(moved), max(moved)) if moved else ()


def with_ranges(rates: ThreadRates, node_us: Sequence[float], q8_reads: Sequence[ProbeRun],
                cached: Sequence[ProbeRun] = ()) -> ThreadRates:
    """`rates` with how far its passes moved: the cost per op over the fixed-cost pair's, the Q8_0 read rate
    over the Q8_0 read model's and the cached read rate over the cached model's."""
    return replace(rates, node_us_range=(min(node_us), max(node_us)) if node_us else (),
                   read_gbs_range=_rate_range(dict(rates.read_gbs).get("Q8_0"), q8_reads),
                   cached_read_gbs_range=_rate_range(dict(rates.cached_read_gbs).get("Q8_0"), cached))


def probe_order(reads: tuple[ProbeModel, ...], rows: ProbeModel, threads: Sequence[int]) -> tuple[ProbeModel, ...]:
    """The models in the order they are timed: the fixed-cost pair at the start, after the rate models and at
    the end; the Q8_0 read model, its file loaded without mmap right beside each pass, the rows model beside
    it, and the cached model from before the second pass of the pair to the end. The rows model only where a
    thread count is over 1: the row cost is fitted at 2 threads or more (device_probe._solve)."""
    q8, unmapped = reads[:1], (unmapped_model(reads[0]),)
    order = (FIXED_COST_MODELS + unmapped + q8 + (rows, CACHED_MODEL) + RATE_MODELS + (CACHED_MODEL,)
             + FIXED_COST_MODELS + (rows,) + q8 + unmapped + reads[1:] + unmapped + q8 + (rows, CACHED_MODEL)
             + FIXED_COST_MODELS)
    return order if any(count > 1 for count in threads) else tuple(model for model in order if model is not rows)


def moved_figures(rates: Sequence[ThreadRates], kept_disturbed: int = 0) -> tuple[str, ...]:
    """A line per figure whose passes moved past MOVED_RATIO (its range already widens the band), and one for
    runs kept disturbed: what tells a user another probe on a quiet machine may land elsewhere."""
    notes = []
    for r in rates:
        for label, span, unit in (("cost per graph op", r.node_us_range, "us"),
                                  ("Q8_0 read rate", r.read_gbs_range, "GB/s"),
                                  ("read rate from the cache", r.cached_read_gbs_range, "GB/s")):
            if span and span[0] > 0 and span[1] / span[0] > MOVED_RATIO:
                notes.append(f"{label} at {threads_text(r.threads)}: {span[0]:.2f}-{span[1]:.2f} {unit} "
                             f"({span[1] / span[0]:.2f}x) between passes")
    if kept_disturbed:
        runs = "run was" if kept_disturbed == 1 else "runs were"
        notes.append(f"{kept_disturbed} {runs} kept disturbed (other processes over {QUIET_SHARE:.0%} of a core, or "
                     f"the median token over {STEADY_RATIO:g}x the fastest) once the time for measuring again "
                     "was spent")
    return tuple(notes)
