"""One bench row per preset: llama-bench's fields plus load, TTFT, memory, energy, heat and quality."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from workbench.core.bench.split_rows import DeviceBench
from workbench.core.errors import WorkbenchError


@dataclass(frozen=True)
class BenchRow:
    """Everything measured for one preset. A figure that could not be measured is None and
    `unavailable` names it with the reason; nothing unavailable is ever written as 0."""

    preset: str
    weights: str  # the preset's weight type, "keep" = the file's own
    model: str  # file name of the source model
    device: str  # device profile name
    # llama-bench's fields (avg/stddev/samples are decode tokens per second, like its tg test)
    model_type: str
    model_size: int  # bytes of weights, as llama.cpp reports them
    model_n_params: int
    n_batch: int
    n_ubatch: int
    n_threads: int
    type_k: str
    type_v: str
    flash_attn: bool
    n_prompt: int
    n_gen: int
    avg_ts: float
    stddev_ts: float
    samples_ts: tuple[float, ...]
    # the rest of the picture
    load_s: float
    ttft_ms: float
    prefill_tps: float
    prefill_stddev_tps: float
    decode_tps: float
    timing_source: str  # "llama.cpp perf counters" or "wall clock"
    peak_rss_bytes: int
    predicted_bytes: int | None
    prediction_error_pct: float | None  # peak RSS against the ledger total (predicted_bytes), %: kept for JSON readers
    kv_bytes: int | None
    power_w: float | None
    joules_per_token: float | None  # per generated token
    peak_temp_c: float | None
    throttled: bool | None
    pct_of_bandwidth_bound: float | None
    ppl: float | None
    ppl_ctx: int | None
    ppl_tokens: int | None
    ppl_delta: float | None = None  # against the highest-precision row of the same sweep
    speedup: float | None = None  # decode tok/s over that row's
    reference: str = ""  # the preset the deltas are against
    unavailable: tuple[tuple[str, str], ...] = ()  # (field, why)
    # A split preset (gpu_layers/rpc, bench --rpc): per-device bytes and the per-device decode bound.
    devices: tuple[DeviceBench, ...] = ()
    split_bound_tps: float | None = None  # per-device bandwidth bound including the network term
    network_ms_per_token: float | None = None  # the bound's network term
    # What llama-bench's schema also records (None/"" in rows written before they were kept)
    prefill_samples_ts: tuple[float, ...] = ()  # prompt tokens per second of each timed run
    n_gpu_layers: int | None = None
    split_mode: str = ""
    main_gpu: int | None = None
    tensor_split: str = ""  # "0.00" when not split, as llama-bench prints it
    use_mmap: bool | None = None
    test_time: str = ""  # UTC, "2025-04-24T11:58:50Z", when the timed runs started
    # The speed model's figures for this row's test (ledger/speed.py) and measured / predicted.
    predicted_decode_tps: float | None = None
    predicted_prefill_tps: float | None = None
    decode_vs_predicted: float | None = None
    prefill_vs_predicted: float | None = None
    speed_basis: str = ""
    preset_toml: str = ""  # the preset as its TOML file: what a report's appendix reproduces it from
    # like with like: peak RSS against the RSS expected after load and a prompt of n_prompt (bench/rss_rows.py)
    expected_rss_bytes: int | None = None
    rss_vs_expected_pct: float | None = None  # (peak RSS - expected) / expected x 100
    # the decode rates of this row and the reference differ by less than twice their standard error (NOISE_RULE)
    speedup_within_noise: bool | None = None
    reference_why: str = ""  # why the reference is the reference: named by --reference, or the file as is
    build_commit: str = ""  # the llama.cpp commit of the engine's build (ggml_commit()); "" when not known
    backends: str = ""  # llama-bench's backends: those of the devices that held the model's layers, e.g. "CPU,RPC"
    # Each buffer llama.cpp reported against the ledger's prediction: (reported - predicted) / predicted x 100
    weights_prediction_error_pct: float | None = None
    kv_prediction_error_pct: float | None = None
    compute_prediction_error_pct: float | None = None

    def why_unavailable(self, field_name: str) -> str:
        return dict(self.unavailable).get(field_name, "")


ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BenchRow))


NOISE_RULE = ("within the noise: the two decode rates differ by less than twice the standard error of their "
              "difference, sqrt(s1²/n1 + s2²/n2), from each preset's timed runs (n ≥ 2 each)")


def within_noise(row: BenchRow, reference: BenchRow) -> bool | None:
    """Whether the decode rates of `row` and `reference` differ by less than the runs' spread says they may
    (NOISE_RULE); None with fewer than two timed runs on either side (no spread to judge by)."""
    return means_within_noise((row.avg_ts, row.stddev_ts, len(row.samples_ts)),
                              (reference.avg_ts, reference.stddev_ts, len(reference.samples_ts)))


def means_within_noise(a: tuple[float, float, int], b: tuple[float, float, int]) -> bool | None:
    """NOISE_RULE for two (mean, standard deviation, runs); None with fewer than two runs on either side."""
    (mean_a, sd_a, n_a), (mean_b, sd_b, n_b) = a, b
    if n_a < 2 or n_b < 2:
        return None
    return abs(mean_a - mean_b) < 2 * math.sqrt(sd_a ** 2 / n_a + sd_b ** 2 / n_b)


def choose_reference(rows: tuple[BenchRow, ...], name: str | None = None) -> tuple[BenchRow, str]:
    """The row the deltas are against and why: the preset named (--reference), else the model file as is
    (weights = keep), else the largest weights, saying that no row ran the file as is."""
    if name:
        named = [row for row in rows if row.preset == name]
        if not named:
            raise WorkbenchError(f"--reference {name} is not a preset of this bench",
                                 fix=f"Name one of: {', '.join(row.preset for row in rows)}")
        return named[0], "named by --reference"
    as_is = [row for row in rows if row.weights.lower() == "keep"]
    if as_is:
        return as_is[0], "the model file as is"
    candidates = [row for row in rows if row.ppl is not None] or list(rows)
    largest = max(candidates, key=lambda row: (row.model_size, _kv_precision(row)))
    return largest, "the largest weights: no preset ran the model file as is"


def with_references(rows: tuple[BenchRow, ...], reference_name: str | None = None) -> tuple[BenchRow, ...]:
    """Fill ppl_delta, speedup and whether the speedup is within the noise against the reference row."""
    if not rows:
        return rows
    reference, why = choose_reference(rows, reference_name)
    result = []
    for row in rows:
        notes = dict(row.unavailable)
        delta = None
        if row.ppl is not None and reference.ppl is not None:
            delta = row.ppl - reference.ppl
        else:
            notes["ppl_delta"] = notes.get("ppl", "") or f"no perplexity for reference {reference.preset}"
        speedup = row.decode_tps / reference.decode_tps if reference.decode_tps > 0 else None
        if speedup is None:
            notes["speedup"] = f"reference {reference.preset} has no decode rate"
        noise = None if row is reference else within_noise(row, reference)
        if noise is None:
            notes["speedup_within_noise"] = ("the reference itself" if row is reference
                                             else "fewer than two timed runs: no spread to judge the noise by")
        result.append(
            dataclasses.replace(
                row,
                ppl_delta=delta,
                speedup=speedup,
                reference=reference.preset,
                reference_why=why,
                speedup_within_noise=noise,
                unavailable=tuple(notes.items()),
            )
        )
    return tuple(result)


def _kv_precision(row: BenchRow) -> int:
    # f32 > f16/bf16 > q8_0 > q5 > q4: the cache type's rough bits per element
    bits = {"f32": 32, "f16": 16, "bf16": 16, "q8_0": 8, "q5_1": 6, "q5_0": 5, "q4_1": 5, "q4_0": 4, "iq4_nl": 4}
    return bits.get(row.type_k.lower(), 0) + bits.get(row.type_v.lower(), 0)


def row_to_dict(row: BenchRow) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data["samples_ts"] = list(row.samples_ts)
    data["prefill_samples_ts"] = list(row.prefill_samples_ts)
    data["unavailable"] = {name: why for name, why in row.unavailable}
    return data


def row_from_dict(data: dict[str, Any]) -> BenchRow:
    """Inverse of row_to_dict; unknown keys (from a newer writer) are ignored."""
    values = {name: data[name] for name in ROW_FIELDS if name in data}
    values["samples_ts"] = tuple(float(x) for x in values.get("samples_ts", ()))
    values["prefill_samples_ts"] = tuple(float(x) for x in values.get("prefill_samples_ts", ()))
    notes = values.get("unavailable", {})
    values["unavailable"] = tuple(notes.items()) if isinstance(notes, dict) else tuple(tuple(x) for x in notes)
    values["devices"] = tuple(DeviceBench(**device) for device in values.get("devices", ()))
    return BenchRow(**values)
