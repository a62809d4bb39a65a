"""The preset sweep: each preset in a fresh engine process, timed runs, perplexity, memory, heat."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from workbench.core.bench.build_rows import with_build
from workbench.core.bench.engine_watch import EngineWatch
from workbench.core.bench.llama_bench import preset_placement, utc_at_monotonic
from workbench.core.bench.machine import describe_machine
from workbench.core.bench.report import BenchResults
from workbench.core.bench.rows import BenchRow, with_references
from workbench.core.bench.rss_rows import with_expected_rss
from workbench.core.bench.speed_rows import with_speed_prediction
from workbench.core.bench.split_rows import split_row_fields
from workbench.core.config.host import profile_is_this_machine
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import preset_to_toml
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import EngineFailed, Loaded, LoadProgressed
from workbench.core.engine.measured import EngineFacts, PerplexityMeasured, SpeedMeasured
from workbench.core.engine.protocol import OpFinished, OpProgressed
from workbench.core.errors import EngineError, WorkbenchError
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.types import Ledger
from workbench.core.paths import data_dir
from workbench.core.telemetry.sample import TelemetrySample
from workbench.core.telemetry.sampler import Sampler

EVAL_TEXT_FILE = "small_devices_field_guide.txt"
WARMUP_PROMPT_MAX = 32  # llama-bench's warm-up: a short prompt and one generated token


def shipped_eval_text() -> str:
    return (data_dir("assets") / "eval" / EVAL_TEXT_FILE).read_text(encoding="utf-8")


@dataclass(frozen=True)
class SweepConfig:
    model_path: Path
    presets: tuple[Preset, ...]
    device: DeviceProfile
    n_prompt: int = 256
    n_gen: int = 128
    repetitions: int = 3
    seed: int = 0
    eval_text: str | None = None  # None: the shipped evaluation text
    ppl_ctx: int = 512  # the same window for every preset, so perplexities compare
    telemetry_root: str = "/"
    rpc: tuple = ()  # --rpc nodes (RpcEndpoint, profiles kept) for each row's per-device prediction
    reference: str | None = None  # the preset Δppl and speedup are against (None: the model file as is)
    perplexity: bool = True  # False (--no-perplexity): skip the perplexity step, most of a short sweep's time

    @property
    def steps_per_preset(self) -> int:
        return 2 + self.repetitions + self.perplexity  # load, warm-up, runs, perplexity


# progress events, in the order a sweep yields them
@dataclass(frozen=True)
class SweepStarted:
    presets: tuple[str, ...]
    total_steps: int


@dataclass(frozen=True)
class SweepStepStarted:
    preset: str
    step: str  # "load", "quantizing", "warm-up", "run 2/3", "perplexity"
    done_steps: int
    total_steps: int
    fraction: float = 0.0  # of this step, where the step reports it (perplexity: per scored window)


@dataclass(frozen=True)
class PresetMeasured:
    row: BenchRow  # deltas against the reference are filled in SweepFinished's rows
    prediction_check: str = ""  # the load's one line when a buffer was over 5% off the ledger


@dataclass(frozen=True)
class PresetFailed:
    preset: str
    message: str


@dataclass(frozen=True)
class SweepFinished:
    results: BenchResults
    failures: tuple[PresetFailed, ...] = ()
    cancelled: bool = False


SweepEvent = SweepStarted | SweepStepStarted | PresetMeasured | PresetFailed | SweepFinished


@dataclass
class _PresetRun:
    """What one preset produced, gathered while its engine runs."""

    loaded: Loaded | None = None
    facts: EngineFacts | None = None
    speeds: list[SpeedMeasured] = field(default_factory=list)
    perplexity: PerplexityMeasured | None = None
    ppl_error: str = ""
    runs_started_at: float = 0.0
    runs_finished_at: float = 0.0
    watch: EngineWatch | None = None


def run_sweep(config: SweepConfig, cancel: threading.Event | None = None) -> Iterator[SweepEvent]:
    """Measure every preset in turn; yields progress, one row per preset, then the results."""
    if config.repetitions < 1 or config.n_prompt < 1 or config.n_gen < 1:
        raise WorkbenchError("-p, -n and -r must each be at least 1", where="bench", fix="e.g. -p 256 -n 128 -r 3")
    model_info = read_gguf(config.model_path)
    eval_text = config.eval_text if config.eval_text is not None else shipped_eval_text()
    cancel = cancel or threading.Event()
    total = len(config.presets) * config.steps_per_preset
    yield SweepStarted(presets=tuple(p.name for p in config.presets), total_steps=total)
    rows: list[BenchRow] = []
    failures: list[PresetFailed] = []
    machine_facts: EngineFacts | None = None
    for index, preset in enumerate(config.presets):
        if cancel.is_set():
            break
        first_step = index * config.steps_per_preset
        try:
            run = _PresetRun()
            yield from _measure_preset(config, preset, eval_text, first_step, total, run, cancel)
            if cancel.is_set():
                break
            ledger, ledger_error = _predict(model_info, preset, config.device)
            # A board simulated here: this machine's rate would mis-correct the board's predictions.
            row = with_speed_prediction(build_row(config, preset, run, ledger, ledger_error), model_info, preset,
                                        config.device, remember=profile_is_this_machine(config.device.name))
            row = with_build(with_expected_rss(row, model_info, preset, ledger), run.facts, run.loaded)
            machine_facts = machine_facts or run.facts
            rows.append(row)
            yield PresetMeasured(row, run.loaded.prediction_check if run.loaded else "")
        except WorkbenchError as error:
            failure = PresetFailed(preset.name, str(error))
            failures.append(failure)
            yield failure
    machine = describe_machine(config.device, machine_facts, root=config.telemetry_root)
    results = BenchResults(machine, with_references(tuple(rows), config.reference))
    yield SweepFinished(results, tuple(failures), cancel.is_set())


def _measure_preset(
    config: SweepConfig,
    preset: Preset,
    eval_text: str,
    first_step: int,
    total: int,
    run: _PresetRun,
    cancel: threading.Event,
) -> Iterator[SweepEvent]:

    client = EngineClient()
    client.start()
    watch: EngineWatch | None = None
    sampler: Sampler | None = None
    try:
        sampler = Sampler(root=config.telemetry_root, engine_pid=client.pid)
        watch = run.watch = EngineWatch(client.pid, sampler.sample).start()
        yield SweepStepStarted(preset.name, "load", first_step, total)
        for event in _load_events(client, config.model_path, preset, config.device):
            if isinstance(event, LoadProgressed) and event.stage not in ("validating", "loading"):
                yield SweepStepStarted(preset.name, event.stage, first_step, total)
            elif isinstance(event, Loaded):
                run.loaded = event
        run.facts = client.run_op("system_info")
        if config.n_prompt + config.n_gen > run.facts.n_ctx:
            raise WorkbenchError(
                f"-p {config.n_prompt} plus -n {config.n_gen} exceed {preset.name}'s context of {run.facts.n_ctx}",
                fix="lower -p/-n or raise the preset's ctx_size",
            )
        if cancel.is_set():
            return
        yield SweepStepStarted(preset.name, "warm-up", first_step + 1, total)
        warm_prompt = min(config.n_prompt, run.facts.n_batch, WARMUP_PROMPT_MAX)
        client.run_op("bench", n_prompt=warm_prompt, n_gen=1, seed=config.seed)
        watch.sample_now()
        for rep in range(config.repetitions):
            if cancel.is_set():
                return
            yield SweepStepStarted(preset.name, f"run {rep + 1}/{config.repetitions}", first_step + 2 + rep, total)
            speed = client.run_op("bench", n_prompt=config.n_prompt, n_gen=config.n_gen, seed=config.seed + rep)
            run.speeds.append(speed)
        run.runs_started_at = run.speeds[0].started_at
        run.runs_finished_at = run.speeds[-1].finished_at
        watch.sample_now()
        # perplexity runs last: the logits of a whole window stay allocated in the engine
        watch.freeze_rss()
        if not config.perplexity:
            run.ppl_error = "perplexity not measured: --no-perplexity"
            return
        yield SweepStepStarted(preset.name, "perplexity", first_step + 2 + config.repetitions, total)
        if cancel.is_set():
            return
        window = min(config.ppl_ctx, run.facts.n_ctx)
        try:
            for event in client.op_events("perplexity", text=eval_text, n_ctx=window):
                if isinstance(event, OpProgressed):
                    yield SweepStepStarted(preset.name, "perplexity", first_step + 2 + config.repetitions, total,
                                           event.fraction)
                elif isinstance(event, OpFinished):
                    run.perplexity = event.result
        except EngineError as error:
            run.ppl_error = str(error)
    finally:
        if watch is not None:
            watch.stop()
        if sampler is not None:
            sampler.close()
        client.close()


def _load_events(client, model_path: Path, preset: Preset, device: DeviceProfile) -> Iterator[LoadProgressed | Loaded]:
    """The engine's load events up to Loaded; a failed load raises EngineError naming the preset."""
    loaded = False
    for event in client.load(model_path, preset, device=device, allow_overbudget=True):
        if isinstance(event, EngineFailed):
            raise EngineError(f"{preset.name} did not load: {event.message}", where=str(model_path))
        loaded = loaded or isinstance(event, Loaded)
        yield event
    if not loaded:
        raise EngineError(f"{preset.name} did not load: the engine ended the load without an answer")


def load_preset_engine(config: SweepConfig, preset: Preset):
    """A fresh engine process with `preset` loaded (the caller closes it)."""
    return load_engine(config.model_path, preset, config.device)


def load_engine(model_path: Path, preset: Preset, device: DeviceProfile):
    """A fresh engine process with `model_path` loaded under `preset` (the caller closes it)."""
    client = EngineClient()
    client.start()
    try:
        for _ in _load_events(client, model_path, preset, device):
            pass
    except BaseException:
        client.close()
        raise
    return client


def _predict(model_info, preset: Preset, device: DeviceProfile) -> tuple[Ledger | None, str]:
    try:
        return predict_ledger(model_info, preset, device), ""
    except WorkbenchError as error:
        return None, f"the ledger could not predict it: {error}"


def build_row(
    config: SweepConfig,
    preset: Preset,
    run: _PresetRun,
    ledger: Ledger | None,
    ledger_error: str,
) -> BenchRow:
    """One row from what the engine measured, the watch saw and the ledger predicted."""
    assert run.loaded is not None and run.facts is not None and run.watch is not None
    loaded, facts, speeds, watch = run.loaded, run.facts, run.speeds, run.watch
    notes: dict[str, str] = {}
    decode = [s.decode_tps for s in speeds]
    prefill = [s.prefill_tps for s in speeds]
    peak_rss = max(watch.peak_rss_bytes, loaded.rss_bytes)

    predicted = ledger.total_bytes if ledger else None
    error_pct = (peak_rss - predicted) / predicted * 100 if predicted else None
    if ledger is None:
        notes["predicted_bytes"] = notes["prediction_error_pct"] = ledger_error

    kv_bytes = loaded.kv_buffer_bytes or None
    if kv_bytes is None:
        notes["kv_bytes"] = "llama.cpp did not report its KV buffer size"

    run_samples = watch.samples_between(run.runs_started_at, run.runs_finished_at + 0.5)
    all_samples = list(watch.samples)
    power_w, power_why = mean_power(run_samples, run.runs_started_at, run.runs_finished_at)
    decode_tps = statistics.fmean(decode)
    joules = power_w / decode_tps if power_w is not None else None
    if power_w is None:
        notes["power_w"] = notes["joules_per_token"] = power_why

    temps = [t.celsius for s in all_samples for t in s.temperatures]
    peak_temp = max(temps) if temps else None
    if peak_temp is None:
        notes["peak_temp_c"] = _why(all_samples, ("temperature",), "no temperature sensor exposed", watch)
    throttles = [s.throttle.active for s in all_samples if s.throttle is not None]
    throttled = any(throttles) if throttles else None
    if throttled is None:
        notes["throttled"] = _why(all_samples, ("throttle",), "no throttle source on this machine", watch)

    pct_bound = None
    if config.device.mem_bandwidth_gbs > 0:
        kv_per_token = ledger.kv_bytes_per_token if ledger else (kv_bytes or 0) // max(facts.n_ctx, 1)
        mean_context = config.n_prompt + config.n_gen / 2  # the cache grows during decode
        bytes_per_token = facts.model_size_bytes + kv_per_token * mean_context
        bound_tps = config.device.mem_bandwidth_gbs * 1e9 / bytes_per_token
        pct_bound = decode_tps / bound_tps * 100
    else:
        notes["pct_of_bandwidth_bound"] = f"device profile {config.device.name} gives no memory bandwidth"

    ppl = run.perplexity
    if ppl is None:
        notes["ppl"] = run.ppl_error or "perplexity was not measured"

    split = split_row_fields(config, preset, loaded, notes)  # adds why its figures are unavailable to notes
    return BenchRow(
        preset=preset.name,
        weights=preset.weights,
        model=Path(config.model_path).name,
        device=config.device.name,
        model_type=facts.model_type,
        model_size=facts.model_size_bytes,
        model_n_params=facts.model_n_params,
        n_batch=facts.n_batch,
        n_ubatch=facts.n_ubatch,
        n_threads=facts.n_threads,
        type_k=preset.cache_type_k,
        type_v=preset.cache_type_v,
        flash_attn=preset.flash_attn,
        n_prompt=config.n_prompt,
        n_gen=config.n_gen,
        avg_ts=decode_tps,
        stddev_ts=statistics.stdev(decode) if len(decode) > 1 else 0.0,  # llama-bench: 0 for one sample
        samples_ts=tuple(decode),
        prefill_samples_ts=tuple(prefill),  # llama-bench's pp test: its per-run rates
        test_time=utc_at_monotonic(run.runs_started_at),
        **preset_placement(preset),
        load_s=loaded.load_seconds,
        ttft_ms=statistics.fmean(s.ttft_seconds for s in speeds) * 1000,
        prefill_tps=statistics.fmean(prefill),
        prefill_stddev_tps=statistics.stdev(prefill) if len(prefill) > 1 else 0.0,
        decode_tps=decode_tps,
        timing_source=", ".join(sorted({s.timing_source for s in speeds})),
        peak_rss_bytes=peak_rss,
        predicted_bytes=predicted,
        prediction_error_pct=error_pct,
        **buffer_error_fields(loaded, notes),
        kv_bytes=kv_bytes,
        power_w=power_w,
        joules_per_token=joules,
        peak_temp_c=peak_temp,
        throttled=throttled,
        pct_of_bandwidth_bound=pct_bound,
        ppl=ppl.ppl if ppl else None,
        ppl_ctx=ppl.n_ctx if ppl else None,
        ppl_tokens=ppl.n_tokens_scored if ppl else None,
        unavailable=tuple(notes.items()),
        preset_toml=preset_to_toml(preset),
        **split,
    )


def mean_power(samples: list[TelemetrySample], start: float, end: float) -> tuple[float | None, str]:
    """Mean power over the timed runs: from the energy counter when it moved, else the rail readings."""
    with_energy = [s for s in samples if s.energy_j is not None]
    if len(with_energy) >= 2 and with_energy[-1].timestamp > with_energy[0].timestamp:
        joules = with_energy[-1].energy_j - with_energy[0].energy_j
        return joules / (with_energy[-1].timestamp - with_energy[0].timestamp), ""
    readings = [s.total_power_w for s in samples if s.total_power_w is not None]
    if readings:
        return statistics.fmean(readings), ""
    why = _why(samples, ("power", "energy"), "", None)
    if not why and samples:
        why = "no power source on this machine"
    return None, why or "the runs were too short for a power sample"


def _why(samples: list[TelemetrySample], what: tuple[str, ...], default: str, watch: EngineWatch | None) -> str:
    for sample in reversed(samples):
        for item in sample.unavailable:
            if item.what in what:
                return item.why
    if watch is not None and watch.sample_errors:
        return f"telemetry failed: {watch.sample_errors[-1]}"
    return default


def buffer_error_fields(loaded: Loaded, notes: dict[str, str]) -> dict[str, float | None]:
    """The row's per-buffer prediction errors from the load (ledger/buffer_check), or why each is missing."""
    errors = dict(loaded.prediction_errors_pct)
    fields = {}
    for buffer, prefix in (("weights", "weights"), ("KV", "kv"), ("compute", "compute")):
        name = f"{prefix}_prediction_error_pct"
        fields[name] = errors.get(buffer)
        if fields[name] is None:
            notes[name] = "no ledger prediction or no llama.cpp report for this buffer"
    return fields
