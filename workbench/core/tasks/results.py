"""Task bench results: one row per (preset, N, setting) with accuracy and its cost, in md/csv/json/jsonl."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass
from typing import Any

from workbench.core.tasks.stats import pareto_front

NOT_AVAILABLE = "n/a"
TASK_FILE_FORMAT = "workbench-bench-task/1"


@dataclass(frozen=True)
class QuestionOutcome:
    """What N samples answered to one question, and the vote."""

    index: int
    prompt: str
    expected: str
    voted: str | None  # None: no sample gave a parseable answer (counted wrong)
    correct: bool
    answers: tuple[str | None, ...]  # each sample's extracted answer
    unparseable_texts: tuple[str, ...]  # the texts no answer could be extracted from, shown to the user


@dataclass(frozen=True)
class TaskRow:
    """One measured point. A figure that could not be measured is None and `unavailable` says why."""

    task: str
    preset: str
    weights: str
    model: str
    device: str
    samples: int  # N, the samples voted over per question
    questions: int
    correct: int
    accuracy: float
    accuracy_ci: tuple[float, float]  # 95% Wilson interval
    unparseable: int  # questions whose N samples gave no parseable answer at all
    seconds_per_question: float
    tokens_per_question: float  # generated tokens, all N samples
    joules_per_question: float | None
    power_w: float | None
    n_threads: int
    cpu_max_khz: int | None = None  # the DVFS cap in force; None: the machine's own setting
    governor: str = ""
    prompt_evals_per_question: float | None = None  # the engine's count: 1 when the prompt is shared
    decode_calls_per_question: float | None = None
    battery_hours: float | None = None  # hours of continuous generation from the device's battery
    answers_per_charge: float | None = None
    pareto_latency: bool = False  # on the accuracy-vs-seconds front of this run
    pareto_energy: bool = False  # on the accuracy-vs-joules front
    unavailable: tuple[tuple[str, str], ...] = ()

    def why_unavailable(self, field_name: str) -> str:
        return dict(self.unavailable).get(field_name, "")


TASK_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(TaskRow))


def with_pareto(rows: tuple[TaskRow, ...]) -> tuple[TaskRow, ...]:
    """Mark the rows on the accuracy-vs-latency and accuracy-vs-energy Pareto fronts."""
    latency = {id(r) for r in pareto_front(rows, lambda r: r.seconds_per_question, lambda r: r.accuracy)}
    energy = {id(r) for r in pareto_front(rows, lambda r: r.joules_per_question, lambda r: r.accuracy)}
    return tuple(dataclasses.replace(r, pareto_latency=id(r) in latency, pareto_energy=id(r) in energy) for r in rows)


def task_row_to_dict(row: TaskRow) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data["accuracy_ci"] = list(row.accuracy_ci)
    data["unavailable"] = dict(row.unavailable)
    return data


def task_row_from_dict(data: dict[str, Any]) -> TaskRow:
    """Inverse of task_row_to_dict; unknown keys are ignored, wrong shapes raise ValueError."""
    values = {name: data[name] for name in TASK_ROW_FIELDS if name in data}
    ci = values.get("accuracy_ci")
    if not (isinstance(ci, list | tuple) and len(ci) == 2):
        raise ValueError("accuracy_ci must be a pair [low, high]")
    values["accuracy_ci"] = (float(ci[0]), float(ci[1]))
    notes = values.get("unavailable", {})
    values["unavailable"] = tuple(notes.items()) if isinstance(notes, dict) else ()
    return TaskRow(**values)


def _cell(value: Any, fmt: str = "") -> str:
    if value is None:
        return NOT_AVAILABLE
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, fmt) if fmt else str(value)


def _mhz(row: TaskRow) -> str:
    return "as set" if row.cpu_max_khz is None else f"{row.cpu_max_khz / 1000:.0f}"


def task_markdown(rows: tuple[TaskRow, ...], battery: bool = False) -> str:
    """The triangle table: accuracy (95% CI) against seconds, tokens and joules per question."""
    header = ["task", "preset", "N", "threads", "CPU max MHz", "accuracy", "95% CI", "unparsed",
              "s/question", "tokens/question", "J/question", "W", "Pareto"]
    if battery:
        header += ["battery h", "answers/charge"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    notes: dict[str, int] = {}
    for row in rows:
        front = "/".join(name for name, on in (("latency", row.pareto_latency), ("energy", row.pareto_energy)) if on)
        cells = [row.task, row.preset, str(row.samples), str(row.n_threads), _mhz(row),
                 f"{row.accuracy:.2f} ({row.correct}/{row.questions})",
                 f"{row.accuracy_ci[0]:.2f}-{row.accuracy_ci[1]:.2f}", str(row.unparseable),
                 f"{row.seconds_per_question:.2f}", f"{row.tokens_per_question:.1f}",
                 _noted(row, "joules_per_question", ".2f", notes), _noted(row, "power_w", ".2f", notes), front or "-"]
        if battery:
            cells += [_noted(row, "battery_hours", ".1f", notes), _noted(row, "answers_per_charge", ",.0f", notes)]
        lines.append("| " + " | ".join(cells) + " |")
    for why, number in notes.items():
        lines.append(f"[{number}] {why}")
    return "\n".join(lines) + "\n"


def _noted(row: TaskRow, name: str, fmt: str, notes: dict[str, int]) -> str:
    value = getattr(row, name)
    if value is not None:
        return format(value, fmt)
    why = row.why_unavailable(name) or "not measured"
    number = notes.setdefault(why, len(notes) + 1)
    return f"n/a [{number}]"


def task_csv(rows: tuple[TaskRow, ...]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TASK_ROW_FIELDS)
    for row in rows:
        data = task_row_to_dict(row)
        writer.writerow(_csv_value(name, data[name]) for name in TASK_ROW_FIELDS)
    return out.getvalue()


def _csv_value(name: str, value: Any) -> str:
    if value is None:
        return NOT_AVAILABLE
    if name == "accuracy_ci":
        return f"{value[0]!r};{value[1]!r}"
    if name == "unavailable":
        return json.dumps(value) if value else ""
    return repr(value) if isinstance(value, float) else str(value)


def task_json(rows: tuple[TaskRow, ...], machine: dict[str, Any], outcomes: dict[str, Any] | None = None) -> str:
    document = {"format": TASK_FILE_FORMAT, "machine": machine, "rows": [task_row_to_dict(r) for r in rows]}
    if outcomes:
        document["questions"] = outcomes
    return json.dumps(document, indent=2) + "\n"


def task_jsonl(rows: tuple[TaskRow, ...], machine: dict[str, Any]) -> str:
    return "".join(json.dumps({**task_row_to_dict(row), "machine": machine}) + "\n" for row in rows)


def render_task_rows(rows: tuple[TaskRow, ...], fmt: str, machine: dict[str, Any], battery: bool = False) -> str:
    if fmt == "md":
        return task_markdown(rows, battery)
    if fmt == "csv":
        return task_csv(rows)
    if fmt == "json":
        return task_json(rows, machine)
    if fmt == "jsonl":
        return task_jsonl(rows, machine)
    raise ValueError(f"unknown format {fmt!r}")
