"""`workbench devices probe`: this machine's decode and prefill rates, measured with llama.cpp on generated models."""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from workbench.core.bench.probe_models import (
    CACHED_MODEL,
    FIXED_COST_MODELS,
    RATE_MODELS,
    READ_CACHE_MULTIPLE,
    ROWS_CACHE_MULTIPLE,
    read_models,
    rows_model,
    unmapped_model,
    write_probe_model,
)
from workbench.core.bench.probe_passes import ProbeRun, median_pass, median_run, probe_order, with_ranges
from workbench.core.bench.quiet_runs import QUIET_SHARE, QUIET_TRIES, STEADY_RATIO, RetryBudget, quiet_run
from workbench.core.bench.thread_scaling import SCALING_MARGIN, bounded_by_fewer_threads
from workbench.core.config.cpu_topology import format_cpu_list
from workbench.core.config.preset import Preset, ThreadRates
from workbench.core.engine.client import EngineClient
from workbench.core.engine.measured import RatesMeasured
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.speed import (
    attended_cells,
    cache_holds,
    decode_token_seconds,
    prefill_attention_seconds,
    prefill_token_seconds,
)
from workbench.core.ledger.speed_costs import ModelCosts, model_costs
from workbench.core.units import threads_text

DEPTH = 1024  # the attention terms: the same model at this depth and at 0
PROMPT = 512  # prompt tokens per timed prefill: one ubatch, as llama-bench's pp512
N_GEN = 128  # decodes per run: the median counts, as in benchmarks/speed_prediction.py
READ_GEN = 32  # the read models' decodes: each reads 4x the last-level cache, 32 of them take seconds
REPEATS = 2  # timed prompts per run (the fastest counts)
FIXED_REPEATS = 4  # the fixed-cost models' prompts take a few ms: a burst on the machine moved two of them by 2x
# The fixed costs are the difference of the two fixed-cost models, so the two are timed back to back in
# three passes spread over the probe (probe_order) and the pass of the median difference counts
# (median_pass). At 2 threads this virtual machine's cost per graph op moved between 0.24 and 1.0 us, and
# its Q8_0 read rate between 19 and 24 GB/s, from a few seconds to the next (a cache line passed between
# its two vCPUs in 60-100 ns at times, in 300-400 ns at others: where the host runs them; the 2-thread
# cost of a fixed-cost token sat at one level 48-70% of the time and about 1.35x or 2x above it the rest,
# benchmarks/thread_sync_states.py). A slow level lasts long enough to hold most of a probe's passes:
# five passes put the median on one as often as three (3 of 12 probes each here). One lone pass fitted a
# negative cost per token. The Q8_0 read model, the rows model and the cached one are timed three times
# as well (the rows model's lone timings at 2 threads here ranged from 10.0 to 17.1 ms); how far the
# passes moved is kept (with_ranges) and widens the prediction's band (speed.measured_band).
READ_PROMPT = 8  # the read models time decode only: a short prompt keeps their runs short
DECODE_ONLY_BATCH = 32  # their batch: llama-cpp-python keeps a batch x vocabulary array of scores
QUIET_WAIT_S = 0.5  # before a probe run is measured again: short, the probe keeps to about a minute
# Measuring runs again takes at most this long over the whole probe: a probe here takes 42-52 s without it,
# and one in a long unsteady spell measured so many runs again that it took 64 s.
RETRY_BUDGET_S = 8.0
WARM_UP_TOKENS = 16  # an untimed run after each load: the first decodes after a load ran 1.5x slower here
# The cells the median decode of a run attends over, at depth 0 and at DEPTH (padded as llama.cpp pads them).
FLAT_CELLS, DEEP_CELLS = attended_cells(N_GEN // 2 + 1), attended_cells(DEPTH + N_GEN // 2 + 1)


@dataclass(frozen=True)
class DeviceProbe:
    """What the probe measured, per thread count, and how."""

    rates: tuple[ThreadRates, ...]
    runs: tuple[tuple[str, RatesMeasured], ...]  # (probe model, one run)
    llama_cpp: str
    measured_at: str
    seconds: float
    cpu_cores: tuple[int, ...] = ()  # the CPUs the engine was pinned to; () = not pinned
    cache_mb: float = 0.0  # the last-level cache the probe read from sysfs
    read_mb: float = 0.0  # the smallest read model's weights
    others_cpu: float = 0.0  # the most of a core other processes took during a kept run (cpu_others)
    kept_disturbed: int = 0  # runs kept disturbed: the retry budget was spent (RETRY_BUDGET_S)
    bounded: tuple[str, ...] = ()  # prefill FLOP/s fitted past linear scaling, and what they were bounded to

    @property
    def method(self) -> str:
        fixed = " and ".join(m.name for m in FIXED_COST_MODELS)
        wide = ", ".join(m.weight_type for m in RATE_MODELS)
        return (f"measured by `workbench devices probe` at {self.measured_at} with llama-cpp-python {self.llama_cpp} "
                f"in {self.seconds:.0f} s{self.pinned} on random-weight models it wrote: fixed costs per token, "
                f"per graph op (decode) and per elementwise element (prefill) from {fixed} (2 vs 16 layers, 64 "
                f"wide; of 3 passes spread over the probe, the one of the median difference), prefill FLOP/s per weight type from "
                f"8 x 512 x 2048 models ({wide}), the memory read rate per type from 512 x 2048 models of one KV "
                f"head and {self.read_mb:.0f} MB or more (at least {READ_CACHE_MULTIPLE}x the {self.cache_mb:.1f} MB "
                f"last-level cache in sysfs; Q8_0's of 3 passes, the median one) and, with "
                f"probe-rows-q8_0 (a tied 128-wide output matrix, at least {ROWS_CACHE_MULTIPLE}x the cache; of 3 "
                f"passes, each beside a Q8_0 read pass, the median one), the cost per weight row streamed from memory "
                f"at 2 threads or more, the Q8_0 read rate from llama.cpp's own memory (mmap off, RPC nodes) from "
                f"the Q8_0 read model's file loaded without mmap (of 3 passes, each beside a mapped one, the "
                f"median one), the read rate of a model that cache holds from {CACHED_MODEL.name} (4 MB; of 3 "
                f"passes, the median one), "
                f"attention from {FIXED_COST_MODELS[-1].name} (1 head; what the depth added, the median over its 3 "
                f"passes) and the Q8_0 8 x 512 one (8 heads) at depth {DEPTH} vs 0; each written to disk before "
                f"it is timed, with fp16 block scales as varied as a real file's; decode = the median of {N_GEN} "
                f"tokens ({READ_GEN} for the read models), "
                f"prefill = the fastest of {REPEATS} x {PROMPT} tokens ({FIXED_REPEATS} for the fixed-cost models); "
                f"a run during which other processes took over {QUIET_SHARE:.0%} of a core, or whose median "
                f"token took over {STEADY_RATIO:g}x its fastest, is measured again (up to {QUIET_TRIES} times, "
                f"for at most {RETRY_BUDGET_S:.0f} s over the probe, the least disturbed kept): others took at most "
                f"{self.others_cpu:.0%} of a core in a kept run{self.disturbed}; "
                f"the lowest and highest cost per op and read rates over the passes widen the band; a type's "
                f"prefill FLOP/s at more threads is at most {SCALING_MARGIN:g}x the next lower count's times the "
                f"threads' ratio" + (f" (bounded here: {'; '.join(self.bounded)})" if self.bounded else ""))

    @property
    def disturbed(self) -> str:
        if not self.kept_disturbed:
            return ""
        runs = "run was" if self.kept_disturbed == 1 else "runs were"
        return f", and {self.kept_disturbed} {runs} kept disturbed once the {RETRY_BUDGET_S:.0f} s were spent"

    @property
    def pinned(self) -> str:
        return f" with the engine pinned to CPUs {format_cpu_list(self.cpu_cores)}," if self.cpu_cores else ""


def warm_up(engine: EngineClient, threads: Sequence[int]) -> None:
    """One short untimed prefill and decode at each thread count, right after a load: the first run of
    a freshly loaded model decoded gemma3's tiny file at 270 tok/s and every later one at 420 here."""
    for count in threads:
        engine.run_op("rates", threads=count, depth=0, n_prompt=WARM_UP_TOKENS, n_gen=WARM_UP_TOKENS, repeats=1)


def _positive(value: float) -> float | None:
    return value if value > 0 else None


def _pair(a1: float, b1: float, d1: float, a2: float, b2: float, d2: float) -> tuple[float, float]:
    """x, y >= 0 of a1 x + b1 y = d1 and a2 x + b2 y = d2; a negative one is taken as 0 and the other refitted."""
    det = a1 * b2 - a2 * b1
    x, y = ((d1 * b2 - d2 * b1) / det, (a1 * d2 - a2 * d1) / det) if det else (-1.0, -1.0)
    if x >= 0 and y >= 0:
        return x, y
    if x < 0 and y < 0:
        return 0.0, 0.0
    if x < 0:
        return 0.0, max(0.0, (b1 * d1 + b2 * d2) / (b1 * b1 + b2 * b2))
    return max(0.0, (a1 * d1 + a2 * d2) / (a1 * a1 + a2 * a2)), 0.0


def _attention(deep: tuple[ProbeRun, ProbeRun], cache_mb: float) -> tuple[float, float, tuple[tuple[float, float], ...]]:
    """Decode: seconds per attention FLOP and per KV byte read from memory; prefill: the cost per (head,
    query, cell) at two sizes of a layer's score matrix.

    Two models, each at depth 0 and DEPTH: the 1-head tiny one, whose weights and cache the last-level
    cache holds (its decode attention is compute), and the 8-head wide one, whose do not (its attention
    also reads the cache from memory, and its scores outgrow the cache). What the depth added is split
    between the two parts.
    """
    small, wide = deep
    rows, points = [], []
    for run in deep:
        costs, flat, at_depth = run.costs, run.flat, run.deep
        rows.append((costs.attn_flops(DEEP_CELLS) - costs.attn_flops(FLAT_CELLS),
                     costs.kv_bytes(DEEP_CELLS) - costs.kv_bytes(FLAT_CELLS),
                     at_depth.decode_seconds_per_token - flat.decode_seconds_per_token))
        # Without flash attention every query meets every cell of the view: depth + n of them.
        n = flat.n_prompt
        head_cells = costs.layer_positions(1) * costs.n_head * n * DEPTH * costs.head_dims / 128
        extra = at_depth.prefill_seconds - flat.prefill_seconds
        if extra > 0 and head_cells > 0:
            points.append((round(costs.score_mb(n, DEPTH + n), 3), round(extra / head_cells * 1e9, 4)))
    small_cached = cache_holds(cache_mb, small.costs.decode_bytes_total + small.costs.kv_bytes(DEEP_CELLS))
    wide_cached = cache_holds(cache_mb, wide.costs.decode_bytes_total + wide.costs.kv_bytes(DEEP_CELLS))
    if small_cached and not wide_cached:
        (flops_s, _, extra_s), (flops_w, bytes_w, extra_w) = rows
        per_flop = max(0.0, extra_s / flops_s)
        per_byte = max(0.0, (extra_w - flops_w * per_flop) / bytes_w)
    elif small_cached:  # a cache that holds both: the memory part is not seen here
        per_flop, per_byte = max(0.0, rows[1][2] / rows[1][0]), 0.0
    else:  # a cache that holds neither: both parts in both runs
        per_flop, per_byte = _pair(*rows[0], *rows[1])
    return per_flop, per_byte, tuple(sorted(points))


def _solve(threads: int, fixed: Sequence[ProbeRun], wide: Sequence[tuple[str, ProbeRun]],
           cached: ProbeRun | None, cache_mb: float, reads: Sequence[tuple[str, ProbeRun]] = (),
           rows: ProbeRun | None = None, unmapped: ProbeRun | None = None) -> ThreadRates:
    """Attention from the depth pairs, then the fixed costs from the tiny models, then each type's rates:
    the read rate from `reads` (models the cache cannot hold; without them, from `wide`), prefill from `wide`.
    With `rows` (Q8_0 in short rows, as large as the Q8_0 read model) at 2 threads or more, the cost per
    weight row and Q8_0's read rate are the two unknowns of those two models' decodes: threads take a
    mat-vec's 64-row chunks from one shared counter. One thread takes them uncontended, and its fit
    here swung from 0 to 20 ns between runs while a 262,144-row output decoded faster per byte than the
    read model, so one thread's row cost is 0. The row cost is fitted on, and charged to, weights
    streamed from memory only: charged to the cache-resident probe, it left that model a read rate of
    74 GB/s at 2 threads, and olmoe's tiny file then decoded 1.3-1.6x faster than predicted."""
    decode_flop, per_byte, points = _attention((fixed[-1], wide[0][1]), cache_mb)

    def decode_attention(costs: ModelCosts, position: float) -> float:
        kv_bytes = costs.kv_bytes(position)
        from_memory = not cache_holds(cache_mb, costs.decode_bytes_total + kv_bytes)
        return costs.attn_flops(position) * decode_flop + (kv_bytes * per_byte if from_memory else 0.0)

    def prefill_attention(costs: ModelCosts, n: int) -> float:
        return prefill_attention_seconds(costs, points, n, n)

    # The tiny models' own few weights and FLOPs, once rates for them are known.
    read_s_per_byte = flop_s = row_s = 0.0
    q8_read = dict(reads).get("Q8_0")
    def row_cost(costs: ModelCosts) -> float:  # rows cost apart from their bytes when streamed from memory
        return 0.0 if cache_holds(cache_mb, costs.decode_bytes_total) else costs.decode_rows * row_s

    for _ in range(4):  # each pass refines that rate; the fixed costs settle within 0.1% by the fourth
        (small, deep) = fixed
        dec = [r.flat.decode_seconds_per_token - decode_attention(r.costs, FLAT_CELLS)
               - r.costs.decode_bytes_total * read_s_per_byte - row_cost(r.costs) for r in fixed]
        pre = [(r.flat.prefill_seconds - prefill_attention(r.costs, r.flat.n_prompt)
                - sum(f for _, f in r.costs.prefill_flops) * r.flat.n_prompt * flop_s
                - sum(b for _, b in r.costs.output_bytes) * read_s_per_byte) / r.flat.n_prompt for r in fixed]
        layers = deep.costs.n_layer - small.costs.n_layer
        layer_s = max(0.0, (dec[1] - dec[0]) / layers)
        # The same difference per op of the graph: a layer of more ops (norms, routers) costs more.
        nodes = deep.costs.graph_nodes - small.costs.graph_nodes
        node_s = max(0.0, (dec[1] - dec[0]) / nodes) if nodes > 0 and small.costs.graph_nodes else 0.0
        token_s = max(0.0, dec[0] - (small.costs.graph_nodes * node_s if node_s else small.costs.n_layer * layer_s))
        p_layer_s = max(0.0, (pre[1] - pre[0]) / layers)
        # The same difference per elementwise element: a wider or busier layer costs more than the probe's.
        elements = deep.costs.prefill_elements - small.costs.prefill_elements
        p_element_s = max(0.0, (pre[1] - pre[0]) / elements) if elements > 0 and small.costs.prefill_elements else 0.0
        p_token_s = max(0.0, pre[0] - (small.costs.prefill_elements * p_element_s if p_element_s
                                       else small.costs.n_layer * p_layer_s))

        def unfixed(run: ProbeRun) -> float:
            return (run.flat.decode_seconds_per_token - decode_attention(run.costs, FLAT_CELLS)
                    - decode_token_seconds(run.costs, token_s * 1e6, layer_s * 1e6, node_s * 1e6))

        # A cache that holds the rows model (one past its vocabulary's cap) shows no row cost: it stays 0.
        streamed = rows is not None and not cache_holds(cache_mb, rows.costs.decode_bytes_total)
        if streamed and q8_read is not None and threads > 1:
            _, row_s = _pair(q8_read.costs.decode_bytes_total, q8_read.costs.decode_rows, unfixed(q8_read),
                             rows.costs.decode_bytes_total, rows.costs.decode_rows, unfixed(rows))

        def spent(run: ProbeRun) -> float:
            return unfixed(run) - row_cost(run.costs)

        read: dict[str, float] = {}
        gflops: dict[str, float] = {}

        def read_rate(kind: str, run: ProbeRun) -> float:
            own = dict(run.costs.decode_bytes).get(kind, 0)
            other = run.costs.decode_bytes_total - own  # the Q8_0 embedding row and output layer, the F32 norms
            left = spent(run) - (other / (read["Q8_0"] * 1e9) if "Q8_0" in read else 0)
            return own / (left if left > 0 else run.flat.decode_seconds_per_token) / 1e9

        for kind, run in reads or wide:
            read[kind] = read_rate(kind, run)
        unmapped_gbs = read_rate("Q8_0", unmapped) if unmapped is not None and "Q8_0" in read else None
        for kind, run in wide:
            n = run.flat.n_prompt
            p_left = (run.flat.prefill_seconds - prefill_attention(run.costs, n)
                      - n * prefill_token_seconds(run.costs, p_token_s * 1e6, p_layer_s * 1e6, p_element_s * 1e9))
            p_left -= sum(b for _, b in run.costs.output_bytes) / (read["Q8_0"] * 1e9)
            flops = dict(run.costs.prefill_flops).get(kind, 0) * n
            gflops[kind] = flops / (p_left if p_left > 0 else run.flat.prefill_seconds) / 1e9
        cached_gbs = None
        if cached is not None:
            left = spent(cached)
            cached_gbs = cached.costs.decode_bytes_total / (left if left > 0 else cached.flat.decode_seconds_per_token) / 1e9
        read_s_per_byte = 1 / ((cached_gbs or read["Q8_0"]) * 1e9)
        flop_s = 1 / (gflops["Q8_0"] * 1e9)
    return ThreadRates(threads=threads, token_us=token_s * 1e6, layer_us=layer_s * 1e6, node_us=node_s * 1e6,
                       read_gbs=tuple((k, round(v, 3)) for k, v in read.items()),
                       kv_read_gbs=_positive(round(1 / per_byte / 1e9, 3)) if per_byte else None,
                       prefill_token_us=p_token_s * 1e6, prefill_layer_us=p_layer_s * 1e6,
                       prefill_element_ns=p_element_s * 1e9,
                       prefill_gflops=tuple((k, round(v, 3)) for k, v in gflops.items()),
                       attn_gflops=_positive(round(1 / decode_flop / 1e9, 3)) if decode_flop else None,
                       prefill_attn_points=points,
                       cached_read_gbs=(("Q8_0", round(cached_gbs, 3)),) if cached_gbs else (),
                       cache_mb=cache_mb, row_ns=row_s * 1e9,
                       unmapped_read_gbs=round(unmapped_gbs, 3) if unmapped_gbs else None)


def last_level_cache_mb(root: str = "/") -> float:
    """The largest CPU cache sysfs lists for cpu0 (its highest level), in MB; 0 when unreadable."""
    base = Path(root) / "sys/devices/system/cpu/cpu0/cache"
    best = (0, 0.0)
    for index in sorted(base.glob("index[0-9]*"))[:16]:
        try:
            level = int((index / "level").read_text()[:8])
            size = (index / "size").read_text(encoding="ascii", errors="replace")[:16].strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(size[-1:], 1)
        digits = size.rstrip("KM")
        if digits.isdigit() and 0 <= level <= 8:
            best = max(best, (level, int(digits) * scale / 1e6))
    return best[1] if best[1] <= 4096 else 0.0


def probe_device(threads: Sequence[int], *, progress: Callable[[str], None] = lambda _line: None,
                 workdir: Path | None = None, cpu_cores: tuple[int, ...] = ()) -> DeviceProbe:
    """Write the probe models, time each at every thread count in one engine, and solve for the rates.

    `cpu_cores` pins the engine (llama.cpp's --cpu-range): on a board whose cores differ, one probe per
    core type, each written as its own profile, gives each type's figures."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries (only for its version)

    started = time.perf_counter()
    cache_mb = last_level_cache_mb()
    reads = read_models(cache_mb, _ram_mb())
    rows = rows_model(cache_mb, _ram_mb())
    unmapped = unmapped_model(reads[0])
    deep_models = {FIXED_COST_MODELS[-1].name, RATE_MODELS[0].name}
    runs: list[tuple[str, RatesMeasured]] = []
    passes: dict[tuple[str, int], list[ProbeRun]] = {}
    costs_of: dict[str, ModelCosts] = {}
    read_mb = worst_other = 0.0
    order = probe_order(reads, rows, threads)
    last_pass = {model.file_name: i for i, model in enumerate(order)}
    uncached = False  # the cached model, once this machine's cache is found not to hold it
    budget = RetryBudget(RETRY_BUDGET_S)
    with tempfile.TemporaryDirectory(prefix="workbench-probe-", dir=workdir) as folder, EngineClient() as engine:
        for position, model in enumerate(order):
            if model is CACHED_MODEL and uncached:
                continue
            path = Path(folder) / f"{model.file_name}.gguf"
            if model.file_name not in costs_of:  # a model's later pass loads the file of its first
                costs_of[model.file_name] = model_costs(read_gguf(write_probe_model(path, model)))
            costs = costs_of[model.file_name]
            if model is CACHED_MODEL and not cache_holds(cache_mb, costs.decode_bytes_total):
                uncached = True
                path.unlink()
                continue  # no cache that holds it (speed.cache_holds): every model reads from memory here
            decode_only = model in reads or model is rows or not model.mapped
            if model in reads:
                read_mb = min(read_mb or math.inf, costs.decode_bytes_total / 1e6)
            counts = [count for count in threads if count > 1] if model is rows else list(threads)
            batch = DECODE_ONLY_BATCH if decode_only else PROMPT
            engine.load_blocking(path, Preset(name="probe", ctx_size=256 if decode_only else DEPTH + PROMPT + 256,
                                              batch_size=batch, ubatch_size=batch, threads=max(threads),
                                              cpu_cores=cpu_cores, mmap=model.mapped), allow_overbudget=True)
            warm_up(engine, counts)
            repeats = 1 if decode_only else FIXED_REPEATS if model in FIXED_COST_MODELS else REPEATS
            for count in counts:
                timed = {}
                for depth in (0, DEPTH) if model.name in deep_models else (0,):
                    def timed_run(depth=depth, count=count, decode_only=decode_only, repeats=repeats):
                        return engine.run_op("rates", threads=count, depth=depth,
                                             n_prompt=READ_PROMPT if decode_only else PROMPT,
                                             n_gen=READ_GEN if decode_only else N_GEN, repeats=repeats)
                    run, others = quiet_run(timed_run, wait_s=QUIET_WAIT_S, budget=budget)
                    timed[depth] = run
                    worst_other = max(worst_other, others)
                    runs.append((model.name, run))
                    progress(f"{model.name}: {threads_text(count)}, depth {depth}: decode "
                             f"{1 / run.decode_seconds_per_token:,.0f} tok/s, prefill "
                             f"{run.n_prompt / run.prefill_seconds:,.0f} tok/s")
                passes.setdefault((model.name, count), []).append(ProbeRun(costs, timed[0], timed.get(DEPTH)))
            engine.unload()
            if position == last_pass[model.file_name]:
                path.unlink()  # the read models are large: at most three on disk at a time
    measured = {key: median_run(runs_of) for key, runs_of in passes.items()}
    small, deep = FIXED_COST_MODELS
    for count in threads:
        measured[(small.name, count)], measured[(deep.name, count)] = median_pass(
            passes[(small.name, count)], passes[(deep.name, count)])
    rates = []
    for count in threads:
        wide = [(m.weight_type, measured[(m.name, count)]) for m in RATE_MODELS]

        def solved(fixed: Sequence[ProbeRun], count: int = count, wide: list = wide) -> ThreadRates:
            return _solve(count, fixed, wide, measured.get((CACHED_MODEL.name, count)), cache_mb,
                          [(m.weight_type, measured[(m.name, count)]) for m in reads], measured.get((rows.name, count)),
                          measured.get((unmapped.name, count)))

        fixed_passes = list(zip(passes[(small.name, count)], passes[(deep.name, count)]))
        rates.append(with_ranges(solved([measured[(m.name, count)] for m in FIXED_COST_MODELS]),
                                  [solved(pair).node_us for pair in fixed_passes], passes[(reads[0].name, count)],
                                  passes.get((CACHED_MODEL.name, count), ())))
    bounded_rates, bounded = bounded_by_fewer_threads(rates)
    return DeviceProbe(rates=bounded_rates, runs=tuple(runs), llama_cpp=str(llama_cpp.__version__),
                       measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       seconds=time.perf_counter() - started, cpu_cores=tuple(cpu_cores), cache_mb=cache_mb,
                       read_mb=read_mb, others_cpu=worst_other, kept_disturbed=budget.kept_disturbed,
                       bounded=bounded)


def _ram_mb() -> float:
    """This machine's RAM in MB (0 when the OS does not say): it bounds the read models on a small board."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (ValueError, OSError, AttributeError):
        return 0.0
