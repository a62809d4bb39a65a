"""The stakeholder report's figures: bench rows of one or more devices, checked and bounded (a bench file is
outside data), with the memory verdict, the noise and the answer in words worked out once for every renderer."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from workbench.core.bench.machine import Machine
from workbench.core.bench.report import BenchResults, machine_summary
from workbench.core.bench.rows import BenchRow, means_within_noise
from workbench.core.config.host import profile_is_this_machine
from workbench.core.errors import WorkbenchError
from workbench.core.ledger.llama_build import VERIFIED_LLAMA_CPP, VERIFIED_PACKAGE, VERIFIED_VERSIONS
from workbench.core.ledger.predict import TIGHT_HEADROOM
from workbench.core.ledger.types import DOES_NOT_FIT, FITS, TIGHT
from workbench.core.units import MIB, size

MAX_FILES = 16  # a report compares a handful of devices: more files are refused
MAX_ROWS = 256  # rows of all files together: a chart of more is unreadable, and a file claiming more is not ours
MAX_NAME = 200  # characters of a preset, model, device or machine name
MAX_TEXT = 8192  # characters of a free text (llama.cpp's system info, a reason, a preset's TOML)
MAX_RATE = 1e7  # tokens per second: no machine decodes or reads prompts faster
MAX_BYTES = 1 << 50  # a PiB: larger byte counts are not measurements
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Rate:
    measured: float
    stddev: float
    predicted: float | None
    why_no_prediction: str
    runs: int = 0  # timed runs the mean and deviation are of


@dataclass(frozen=True)
class Memory:
    budget_bytes: int
    weights_bytes: int
    kv_bytes: int | None
    peak_bytes: int  # measured peak resident memory of the engine
    predicted_bytes: int | None  # the ledger's prediction for the board
    verdict: str  # FITS, TIGHT or DOES_NOT_FIT of the measured peak against the budget

    @property
    def rest_bytes(self) -> int:
        """The measured peak beyond weights and KV: compute buffers, runtime and the process (never below 0)."""
        return max(0, self.peak_bytes - self.weights_bytes - (self.kv_bytes or 0))


@dataclass(frozen=True)
class ReportRow:
    device: str  # the device's label in this report
    preset: str
    weights: str
    model: str
    test: str  # "pp256+tg128"
    decode: Rate
    prefill: Rate
    ppl: float | None
    ppl_delta: float | None
    reference: str
    memory: Memory
    joules_per_token: float | None
    peak_temp_c: float | None
    throttled: bool | None
    unavailable: tuple[tuple[str, str], ...]
    preset_toml: str

    def why(self, field_name: str) -> str:
        return dict(self.unavailable).get(field_name, "") or NOT_MEASURED


@dataclass(frozen=True)
class Device:
    label: str
    profile: str
    simulated: bool  # the profile is not the machine the bench ran on
    machine: Machine
    summary: str  # one line: CPU, cores, RAM, OS, llama-cpp-python
    rows: tuple[ReportRow, ...]
    llama_cpp_build: str = ""  # llama-cpp-python's version and, where the workbench knows it, llama.cpp's commit


@dataclass(frozen=True)
class Chart:
    name: str  # "speed", "quality", "memory"
    title: str
    svg: str  # a whole SVG document


@dataclass(frozen=True)
class Report:
    devices: tuple[Device, ...]
    answers: tuple[str, ...]  # the first page's answer in words, one sentence per device
    noise: tuple[tuple[str, str, str], ...]  # (device, preset, preset): decode rates within the noise
    presets: tuple[tuple[str, str], ...]  # (preset, its TOML or why it is not in the bench file)
    workbench_version: str

    @property
    def rows(self) -> tuple[ReportRow, ...]:
        return tuple(row for device in self.devices for row in device.rows)


def _text(value: Any, what: str, where: str, limit: int = MAX_NAME) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise WorkbenchError(f"{what} is not a text of at most {limit:,} characters", where=where,
                             fix="give a bench file written by `workbench bench --output json`")
    return value


def _number(value: Any, what: str, where: str, limit: float, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    try:
        number = math.nan if isinstance(value, bool) or not isinstance(value, int | float) else float(value)
    except OverflowError:  # a JSON integer has no size limit
        number = math.inf
    if not (math.isfinite(number) and 0 <= number <= limit):
        raise WorkbenchError(f"{what} = {str(value)[:30]!r} is not a number from 0 to {limit:g}", where=where,
                             fix="give a bench file written by `workbench bench --output json`")
    return number


def _count(value: Any, what: str, where: str, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BYTES:
        raise WorkbenchError(f"{what} = {str(value)[:30]!r} is not a count from 0 to {MAX_BYTES:,}", where=where,
                             fix="give a bench file written by `workbench bench --output json`")
    return value


def memory_verdict(used_bytes: int, budget_bytes: int) -> str:
    """The ledger's words for a peak against a budget: under 10% of the budget left is tight."""
    headroom = budget_bytes - used_bytes
    if headroom < 0:
        return DOES_NOT_FIT
    return TIGHT if headroom < TIGHT_HEADROOM * budget_bytes else FITS


def report_row(row: BenchRow, device: str, budget_bytes: int, where: str) -> ReportRow:
    """One bench row, every figure it shows checked: a NaN, a negative or absurd figure or a huge text is refused."""
    notes = row.unavailable if isinstance(row.unavailable, tuple) else ()
    reasons = tuple((_text(key, "a reason's field", where), _text(why, f"the reason for {key}", where, MAX_TEXT))
                    for key, why in notes[:64])

    def rate(name: str, value: str, stddev: str, samples: str) -> Rate:
        measured, spread = _number(getattr(row, value), value, where, MAX_RATE), _number(
            getattr(row, stddev), stddev, where, MAX_RATE)
        predicted = f"predicted_{name}_tps"
        assert measured is not None and spread is not None
        runs = getattr(row, samples)
        return Rate(measured, spread, _number(getattr(row, predicted), predicted, where, MAX_RATE, optional=True),
                    dict(reasons).get(predicted, "") or "no prediction in the bench file",
                    len(runs) if isinstance(runs, tuple) else 0)

    weights = _count(row.model_size, "model_size", where)
    peak = _count(row.peak_rss_bytes, "peak_rss_bytes", where)
    assert weights is not None and peak is not None
    n_prompt, n_gen = _count(row.n_prompt, "n_prompt", where), _count(row.n_gen, "n_gen", where)
    return ReportRow(
        device=device,
        preset=_text(row.preset, "the preset name", where),
        weights=_text(row.weights, "the weight type", where),
        model=_text(row.model, "the model name", where),
        test=f"pp{n_prompt}+tg{n_gen}",
        decode=rate("decode", "avg_ts", "stddev_ts", "samples_ts"),
        prefill=rate("prefill", "prefill_tps", "prefill_stddev_tps", "prefill_samples_ts"),
        ppl=_number(row.ppl, "ppl", where, 1e9, optional=True),
        ppl_delta=None if row.ppl_delta is None else _signed(row.ppl_delta, "ppl_delta", where),
        reference=_text(row.reference, "the reference preset", where),
        memory=Memory(budget_bytes, weights, _count(row.kv_bytes, "kv_bytes", where, optional=True), peak,
                      _count(row.predicted_bytes, "predicted_bytes", where, optional=True),
                      memory_verdict(peak, budget_bytes)),
        joules_per_token=_number(row.joules_per_token, "joules_per_token", where, 1e6, optional=True),
        peak_temp_c=None if row.peak_temp_c is None else _signed(row.peak_temp_c, "peak_temp_c", where, 1000),
        throttled=row.throttled if isinstance(row.throttled, bool) else None,
        unavailable=reasons,
        preset_toml=_text(getattr(row, "preset_toml", ""), "the preset's TOML", where, MAX_TEXT),
    )


def _signed(value: Any, what: str, where: str, limit: float = 1e9) -> float:
    """A figure that may be negative (a perplexity delta, a temperature): finite and within ±limit."""
    magnitude = _number(-value if isinstance(value, int | float) and not isinstance(value, bool) and value < 0
                        else value, what, where, limit)
    return math.copysign(magnitude or 0.0, float(value))


def _device(results: BenchResults, name: str, labels: set[str]) -> Device:
    machine = results.machine
    where = name or "a bench file"
    for key in ("label", "hostname", "cpu_model", "os", "device_profile", "python"):
        _text(getattr(machine, key), f"the machine's {key}", where)
    for key in ("llama_cpp_version", "llama_cpp_system_info", "device_description"):
        _text(getattr(machine, key), f"the machine's {key}", where, MAX_TEXT)
    budget = _count(machine.device_budget_mb, "the device budget (MB)", where)
    _count(machine.device_ram_total_mb, "the device RAM (MB)", where)
    _count(machine.ram_bytes, "the machine's RAM", where)
    assert budget is not None
    simulated = not profile_is_this_machine(machine.device_profile, machine.hostname)
    label = f"{machine.device_profile} (simulated on {machine.hostname})" if simulated else machine.label
    base, number = label, 2
    while label in labels:  # two files of one device: a before/after run
        label, number = f"{base} #{number}", number + 1
    labels.add(label)
    rows = tuple(report_row(row, label, budget * MIB, f"{where}: row {index} ({str(row.preset)[:40]})")
                 for index, row in enumerate(results.rows, 1))
    return Device(label, machine.device_profile, simulated, machine, machine_summary(machine), rows,
                  llama_cpp_build(machine.llama_cpp_version))


def llama_cpp_build(version: str) -> str:
    """'llama-cpp-python 0.3.36 (vendored llama.cpp 0c1e570)': the commit from the build the ledger was verified on."""
    if version in VERIFIED_VERSIONS:
        return f"{VERIFIED_PACKAGE} {version} (vendored llama.cpp {VERIFIED_LLAMA_CPP})"
    return f"{VERIFIED_PACKAGE} {version or 'unknown'} (its llama.cpp commit is not known to the workbench)"


def within_noise(a: Rate, b: Rate) -> bool:
    """The bench's rule (rows.NOISE_RULE): closer than twice the standard error of their difference; two rates
    without a spread to judge by (a single run) are not called within the noise."""
    return bool(means_within_noise((a.measured, a.stddev, a.runs), (b.measured, b.stddev, b.runs)))


def pareto_front(rows: tuple[ReportRow, ...]) -> tuple[ReportRow, ...]:
    """The rows with a perplexity that no other row beats on both speed and perplexity, fastest first."""
    scored = [row for row in rows if row.ppl is not None]
    front = [row for row in scored if not any(
        other.decode.measured >= row.decode.measured and other.ppl <= row.ppl  # type: ignore[operator]
        and (other.decode.measured > row.decode.measured or other.ppl < row.ppl)  # type: ignore[operator]
        for other in scored)]
    return tuple(sorted(front, key=lambda row: -row.decode.measured))


def answer(device: Device) -> str:
    """The first page's sentence for one device: the fastest preset that fits, its quality and memory."""
    fitting = [row for row in device.rows if row.memory.verdict != DOES_NOT_FIT]
    if not fitting:
        return f"On {device.label}, no preset of this bench fits the budget of {size(device.rows[0].memory.budget_bytes)}."
    if device.simulated:  # this machine's rates say nothing of the board's order: its predicted ones do
        best = max(fitting, key=lambda row: (row.decode.predicted or 0.0, -(row.ppl or 0.0)))
    else:
        fastest = max(fitting, key=lambda row: row.decode.measured)
        # Rates within the noise of the fastest are as fast: of those, the best perplexity (when measured) answers.
        tied = [row for row in fitting if within_noise(row.decode, fastest.decode)]
        best = min(tied, key=lambda row: (row.ppl is None, row.ppl or 0.0, -row.decode.measured))
    if best.ppl is not None and best.preset == best.reference:
        quality = f"perplexity {best.ppl:.2f} (the reference the others' perplexity is against)"
    elif best.ppl_delta is not None:
        quality = f"{best.ppl_delta:+.2f} perplexity against {best.reference}"
    else:
        quality = "perplexity not measured"
    used = f"using {size(best.memory.peak_bytes)} of {size(best.memory.budget_bytes)}"
    if not device.simulated:
        return f"On {device.label}, {best.preset} gives {best.decode.measured:.1f} tok/s with {quality}, {used}."
    predicted = (f"is predicted to give {best.decode.predicted:.1f} tok/s" if best.decode.predicted is not None
                 else "has no predicted rate (the profile has no speed figures)")
    board = board_name(device.machine.device_description)
    named = f"{board} ({device.profile}, a board" if board else f"{device.profile} (a board"
    return (f"On {named} simulated on {device.machine.hostname}), {best.preset} {predicted} with "
            f"{quality}, {used} of the board's budget; {best.decode.measured:.1f} tok/s was measured on "
            f"{device.machine.hostname}, not on the board.")


def board_name(description: str) -> str:
    """The board's name from its profile's description: the words before the first colon or comma."""
    return description.split(":", 1)[0].split(",", 1)[0].strip()[:MAX_NAME]


def noise_pairs(device: Device) -> list[tuple[str, str, str]]:
    ordered = sorted(device.rows, key=lambda row: -row.decode.measured)
    return [(device.label, a.preset, b.preset) for a, b in zip(ordered, ordered[1:]) if within_noise(a.decode, b.decode)]


def build_report(files: list[tuple[str, BenchResults]], workbench_version: str,
                 library_toml: dict[str, str] | None = None) -> Report:
    """The report of bench files (name, results); `library_toml` gives a preset's TOML from the preset
    library for rows written before the bench kept it (the appendix says which is which)."""
    if not files:
        raise WorkbenchError("no bench file to report", fix="give one or more files written by `workbench bench`")
    if len(files) > MAX_FILES:
        raise WorkbenchError(f"{len(files)} bench files: a report shows at most {MAX_FILES}", fix="report fewer files")
    total = sum(len(results.rows) for _, results in files)
    if total > MAX_ROWS:
        raise WorkbenchError(f"{total:,} bench rows: a report shows at most {MAX_ROWS}", where=files[0][0],
                             fix="report fewer presets or files")
    if total == 0:
        raise WorkbenchError("the bench files hold no rows", where=files[0][0], fix="give files of a finished bench")
    labels: set[str] = set()
    devices = tuple(_device(results, name, labels) for name, results in files)
    presets: dict[str, str] = {}
    for row in (row for device in devices for row in device.rows):
        if row.preset_toml:
            presets.setdefault(row.preset, row.preset_toml)
    for row in (row for device in devices for row in device.rows):
        if row.preset not in presets:
            known = (library_toml or {}).get(row.preset)
            presets[row.preset] = (f"# not in the bench file: the preset library's {row.preset} when the report "
                                   f"was made\n{known}" if known else "# not in the bench file, and no preset of "
                                   "that name in the library")
    return Report(devices, tuple(answer(device) for device in devices),
                  tuple(pair for device in devices for pair in noise_pairs(device)),
                  tuple(presets.items()), _text(workbench_version, "the workbench version", "report"))
