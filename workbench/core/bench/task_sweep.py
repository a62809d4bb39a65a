"""`bench --task`: answer a task's questions with N samples voted per question, per preset, N and DVFS setting."""

from __future__ import annotations

import dataclasses
import statistics
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from workbench.core.bench.dvfs import CpufreqLimits, DvfsSetting
from workbench.core.bench.engine_watch import EngineWatch
from workbench.core.bench.sweep import load_engine, mean_power
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.events import ChatMessage, Sampling
from workbench.core.errors import WorkbenchError
from workbench.core.tasks.battery import answers_per_charge
from workbench.core.tasks.battery import battery_hours as hours_at
from workbench.core.tasks.questions import Question, Task
from workbench.core.tasks.results import QuestionOutcome, TaskRow, with_pareto
from workbench.core.tasks.stats import wilson_interval
from workbench.core.tasks.vote import SampledAnswer, majority_vote
from workbench.core.telemetry.sampler import Sampler

MAX_SAMPLES = 64
MAX_QUESTIONS = 10_000
# Self-consistency needs diverse samples: llama.cpp's usual sampling, the same for every N so N alone varies.
TASK_SAMPLING = Sampling(temperature=0.7, top_p=0.95, top_k=40, min_p=0.05, repeat_penalty=1.0)


@dataclass(frozen=True)
class TaskSweepConfig:
    model_path: Path
    presets: tuple[Preset, ...]
    device: DeviceProfile
    task: Task
    samples: tuple[int, ...] = (1, 2, 4, 8)
    limit: int | None = None  # questions; None: the task's default
    seed: int = 0
    sampling: Sampling = TASK_SAMPLING
    dvfs: tuple[DvfsSetting, ...] = (DvfsSetting(),)  # DvfsSetting() = the machine as it is
    dvfs_limits: CpufreqLimits | None = None  # None: no setting is written
    telemetry_root: str = "/"

    @property
    def n_questions(self) -> int:
        return self.limit if self.limit is not None else self.task.default_limit


@dataclass(frozen=True)
class TaskStepStarted:
    label: str  # "balanced-q4km, N=4, 1200 MHz: question 3/20"
    done: int
    total: int


@dataclass(frozen=True)
class TaskPointMeasured:
    row: TaskRow
    outcomes: tuple[QuestionOutcome, ...]


@dataclass(frozen=True)
class TaskPointFailed:
    label: str
    message: str


@dataclass(frozen=True)
class TaskSweepFinished:
    rows: tuple[TaskRow, ...]
    outcomes: dict[str, tuple[QuestionOutcome, ...]] = field(default_factory=dict)  # row key -> per question
    failures: tuple[TaskPointFailed, ...] = ()
    cancelled: bool = False


def check_task_config(config: TaskSweepConfig) -> None:
    where = "bench --task"
    if not config.samples or any(not 1 <= n <= MAX_SAMPLES for n in config.samples):
        raise WorkbenchError(f"--samples {','.join(map(str, config.samples))}: each N must be from 1 to {MAX_SAMPLES}",
                             where=where, fix="e.g. --samples 1,2,4,8")
    if not 1 <= config.n_questions <= MAX_QUESTIONS:
        raise WorkbenchError(f"--limit {config.n_questions} must be from 1 to {MAX_QUESTIONS}", where=where,
                             fix="e.g. --limit 20")
    if not config.presets:
        raise WorkbenchError("no presets to run the task on", where=where, fix="pass --presets a,b,c")


def row_key(row: TaskRow) -> str:
    return f"{row.preset}|N={row.samples}|t={row.n_threads}|{row.cpu_max_khz or 'as set'}|{row.governor or '-'}"


def run_task_sweep(config: TaskSweepConfig, cancel: threading.Event | None = None) -> Iterator[object]:
    """Yields TaskStepStarted..., TaskPointMeasured / TaskPointFailed per point, then TaskSweepFinished."""
    check_task_config(config)
    cancel = cancel or threading.Event()
    questions = config.task.generate(config.n_questions, config.seed)
    total = len(config.dvfs) * len(config.presets) * len(config.samples) * len(questions)
    rows: list[TaskRow] = []
    outcomes: dict[str, tuple[QuestionOutcome, ...]] = {}
    failures: list[TaskPointFailed] = []
    done = 0
    for setting in config.dvfs:
        if config.dvfs_limits is not None and setting != DvfsSetting():
            config.dvfs_limits.apply(setting)
        for preset in config.presets:
            if cancel.is_set():
                break
            label = f"{preset.name}{'' if setting == DvfsSetting() else ', ' + setting.label}"
            try:
                for event in _run_preset(config, preset, setting, questions, done, total, cancel):
                    if isinstance(event, TaskPointMeasured):
                        rows.append(event.row)
                        outcomes[row_key(event.row)] = event.outcomes
                    elif isinstance(event, TaskStepStarted):
                        done = event.done
                    yield event
            except WorkbenchError as error:
                failure = TaskPointFailed(label, str(error))
                failures.append(failure)
                yield failure
            done = (config.dvfs.index(setting) * len(config.presets) + config.presets.index(preset) + 1) * \
                len(config.samples) * len(questions)
    yield TaskSweepFinished(with_pareto(tuple(rows)), outcomes, tuple(failures), cancel.is_set())


def _run_preset(config: TaskSweepConfig, preset: Preset, setting: DvfsSetting, questions: tuple[Question, ...],
                done: int, total: int, cancel: threading.Event) -> Iterator[object]:

    client = load_engine(config.model_path, preset, config.device)
    sampler = watch = None
    try:
        facts = client.run_op("system_info")
        sampler = Sampler(root=config.telemetry_root, engine_pid=client.pid)
        watch = EngineWatch(client.pid, sampler.sample).start()
        task = config.task
        sampling = dataclasses.replace(config.sampling, max_tokens=task.max_tokens)
        client.sample_n(_messages(task, questions[0]), 1, sampling)  # warm-up: first-call costs stay out of N=1
        for n in config.samples:
            point = f"{preset.name}, N={n}" + ("" if setting == DvfsSetting() else f", {setting.label}")
            watch.sample_now()
            results = []
            for question in questions:
                if cancel.is_set():
                    return
                yield TaskStepStarted(f"{point}: question {question.index + 1}/{len(questions)}", done, total)
                seeded = dataclasses.replace(sampling, seed=config.seed * 100_003 + question.index)
                results.append((question, client.sample_n(_messages(task, question), n, seeded)))
                done += 1
            watch.sample_now()
            yield _point(config, preset, setting, facts, n, results, watch)
    finally:
        if watch is not None:
            watch.stop()
        if sampler is not None:
            sampler.close()
        client.close()


def _messages(task: Task, question: Question) -> tuple[ChatMessage, ...]:
    return (ChatMessage("system", task.instruction), ChatMessage("user", question.prompt))


def _point(config: TaskSweepConfig, preset: Preset, setting: DvfsSetting, facts, n: int, results, watch) -> TaskPointMeasured:
    task = config.task
    outcomes = []
    for question, finished in results:
        sampled = [SampledAnswer(s.text, task.extract(s.text), s.logprob_sum, s.generated_tokens) for s in finished.samples]
        vote = majority_vote(sampled)
        outcomes.append(QuestionOutcome(
            index=question.index,
            prompt=question.prompt,
            expected=question.answer,
            voted=vote.answer,
            correct=vote.answer == question.answer,
            answers=tuple(s.answer for s in sampled),
            unparseable_texts=tuple(s.text for s in sampled if s.answer is None),
        ))
    correct = sum(o.correct for o in outcomes)
    count = len(outcomes)
    seconds = statistics.fmean(f.wall_s for _, f in results)
    tokens = statistics.fmean(sum(s.generated_tokens for s in f.samples) for _, f in results)
    prompt_evals = statistics.fmean(f.prompt_evaluations for _, f in results)
    start, end = results[0][1].started_at, results[-1][1].finished_at
    power_w, why = mean_power(watch.samples_between(start, end + 0.5), start, end)
    notes: dict[str, str] = {}
    joules = power_w * seconds if power_w is not None else None
    if power_w is None:
        notes["power_w"] = notes["joules_per_question"] = why
    battery_hours = answers = None
    battery_wh = getattr(config.device, "battery_wh", None)
    if battery_wh is None:
        notes["battery_hours"] = notes["answers_per_charge"] = f"device profile {config.device.name} gives no battery_wh"
    elif power_w is None:
        notes["battery_hours"] = notes["answers_per_charge"] = why
    else:

        battery_hours = hours_at(battery_wh, power_w)
        answers = answers_per_charge(battery_wh, joules)
    row = TaskRow(
        task=task.name,
        preset=preset.name,
        weights=preset.weights,
        model=Path(config.model_path).name,
        device=config.device.name,
        samples=n,
        questions=count,
        correct=correct,
        accuracy=correct / count,
        accuracy_ci=wilson_interval(correct, count),
        unparseable=sum(o.voted is None for o in outcomes),
        seconds_per_question=seconds,
        tokens_per_question=tokens,
        joules_per_question=joules,
        power_w=power_w,
        n_threads=facts.n_threads,
        cpu_max_khz=setting.max_khz,
        governor=setting.governor or "",
        prompt_evals_per_question=prompt_evals,
        decode_calls_per_question=statistics.fmean(f.decode_calls for _, f in results),
        battery_hours=battery_hours,
        answers_per_charge=answers,
        unavailable=tuple(notes.items()),
    )
    return TaskPointMeasured(row, tuple(outcomes))
