"""`workbench bench --task / --kld / --cpu-max-freq / --governor / --power-cap`: answers, quality and DVFS."""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import io
import json
import sys
import threading
from dataclasses import asdict
from pathlib import Path

from workbench.cli.bench_speed import run_speed
from workbench.cli.progress_bar import draw_bar
from workbench.cli.recurrent_text import sequences_ledger_line
from workbench.core.bench.dvfs import (
    CpufreqLimits,
    DvfsSetting,
    check_governor,
    limits_held,
    parse_frequencies,
    restore_pending,
)
from workbench.core.bench.kld import KLD_FIELDS, KldConfig, KldFinished, KldStep, kld_markdown, run_kld
from workbench.core.bench.machine import describe_machine, machine_to_dict
from workbench.core.bench.sweep import shipped_eval_text
from workbench.core.bench.task_sweep import (
    TaskPointFailed,
    TaskPointMeasured,
    TaskStepStarted,
    TaskSweepConfig,
    TaskSweepFinished,
    run_task_sweep,
)
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset
from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import resolve_model
from workbench.core.files.regular import MIB, read_regular_file
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.core.tasks.power_cap import choose_under_cap
from workbench.core.tasks.registry import TASKS, find_task
from workbench.core.tasks.results import render_task_rows, task_json


def add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("answers, quality against the reference, power")
    group.add_argument("--task", metavar="NAME", help="answer a task's questions and report accuracy per N "
                       "(`--task list` lists them)")
    group.add_argument("--samples", default="1,2,4,8", metavar="LIST",
                       help="N samples decoded together per question, majority vote (default 1,2,4,8)")
    group.add_argument("--limit", type=int, metavar="K", help="questions per point (default: the task's 50)")
    group.add_argument("--threads", metavar="LIST", help="thread counts to sweep, e.g. 1,2 (default: each preset's)")
    group.add_argument("--kld", action="store_true", help="KL divergence of each preset from the model's F16 "
                       "version on the evaluation text: kld_mean, kld_p99, top1_agree, delta_ppl")
    group.add_argument("--kld-tokens", type=int, default=1024, metavar="N",
                       help="scored tokens for --kld (default 1024; the reference keeps n_vocab codes for each)")
    group.add_argument("--cpu-max-freq", metavar="LIST", help="CPU clock caps to sweep the task at: MHz, or "
                       "1.8GHz, max (written to cpufreq where allowed, always restored)")
    group.add_argument("--governor", metavar="NAME", help="cpufreq governor for the sweep (restored after)")
    group.add_argument("--power-cap", type=float, metavar="W", help="choose the most accurate measured point "
                       "whose power stays under W watts")
    group.add_argument("--sysfs-root", default="/", help=argparse.SUPPRESS)  # recorded trees, for tests
    group.add_argument("--dvfs-state", help=argparse.SUPPRESS)  # where the originals are written, for tests


def restore_killed_sweep(args: argparse.Namespace) -> None:
    """Every bench start undoes the CPU clock limits a killed DVFS sweep left behind."""
    message = restore_pending(args.sysfs_root, Path(args.dvfs_state) if args.dvfs_state else None)
    if message:
        print(f"workbench: {message}", file=sys.stderr)


def _int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(item) for item in text.split(",") if item.strip())
    except ValueError:
        values = ()
    if not values or any(v < 1 for v in values):
        raise WorkbenchError(f"{text!r} is not a list of positive whole numbers", where=option,
                             fix=f"e.g. {option} 1,2,4,8")
    return values


def run_mode(args: argparse.Namespace) -> int:
    if args.task == "list":
        return _list_tasks()
    if args.kld and args.task:
        raise WorkbenchError("--kld and --task are two separate runs", where="bench", fix="run one, then the other")
    if args.power_cap is not None and not args.task:
        raise WorkbenchError("--power-cap chooses among task points (accuracy under a power cap)", where="bench",
                             fix="add --task NAME (see `workbench bench --task list`)")
    if args.kld and (args.cpu_max_freq or args.governor):
        raise WorkbenchError("--kld measures quality, which CPU clocks do not change", where="bench",
                             fix="drop --cpu-max-freq/--governor, or sweep them with --task or the speed bench")
    if args.kld:
        return _run_kld(args)
    if not args.task:
        return _run_speed_dvfs(args)
    return _run_task(args)


def _dvfs_settings(args: argparse.Namespace):
    """(settings to sweep, the limits to write or None): one line and the current setting where not writable."""
    if not (args.cpu_max_freq or args.governor):
        return (DvfsSetting(),), None
    governor = check_governor(args.governor) if args.governor else None
    clocks = parse_frequencies(args.cpu_max_freq) if args.cpu_max_freq else (None,)
    limits = CpufreqLimits(args.sysfs_root, Path(args.dvfs_state) if args.dvfs_state else None)
    why = limits.not_writable_reason()
    if why:
        print(f"workbench: {why}", file=sys.stderr)
        return (DvfsSetting(),), None
    return tuple(DvfsSetting(max_khz=khz, governor=governor) for khz in clocks), limits


def _run_speed_dvfs(args: argparse.Namespace) -> int:
    """The speed sweep once per CPU clock setting: a table (and an --out file) per setting."""

    settings, limits = _dvfs_settings(args)
    plain = copy.copy(args)
    plain.cpu_max_freq = plain.governor = None
    if limits is None:
        return run_speed(plain)
    worst = 0
    with limits_held(limits):
        for setting in settings:
            limits.apply(setting)
            heading = f"CPU limits: {setting.label}"
            print(f"\n{heading}\n" if args.output == "md" else heading, file=sys.stdout if args.output == "md" else sys.stderr,
                  flush=True)
            one = copy.copy(plain)
            if args.out:
                out = Path(args.out)
                clock = f"{setting.max_khz // 1000}MHz" if setting.max_khz else "max"
                tag = f"{clock}-{setting.governor}" if setting.governor else clock
                one.out = str(out.with_name(f"{out.stem}-{tag}{out.suffix}"))
            worst = max(worst, run_speed(one))
    return worst


def _list_tasks() -> int:
    for task in TASKS.values():
        print(f"{task.name:<14} {task.description}")
        print(f"{'':<14} source: {task.source}")
    return 0


def _presets(args: argparse.Namespace):
    presets = tuple(load_preset(spec.strip()) for spec in (args.presets or "").split(",") if spec.strip())
    if not presets:
        raise WorkbenchError("no presets to compare", where="bench", fix="pass --presets a,b,c (see `workbench presets`)")
    return presets


def _default_task_preset():
    """`bench --task NAME` alone runs the model as it is (the shipped `as-is` preset)."""
    return load_preset("as-is")


def _run_kld(args: argparse.Namespace) -> int:


    config = KldConfig(resolve_model(args.model), _presets(args), load_device(args.device),
                       _eval_text(args) or shipped_eval_text(), n_ctx=args.ppl_ctx, max_tokens=args.kld_tokens)
    finished = None
    for event in run_kld(config):
        if isinstance(event, KldStep):
            print(event.what, file=sys.stderr, flush=True)
        elif isinstance(event, KldFinished):
            finished = event
    assert finished is not None
    for preset, message in finished.failures:
        print(f"workbench: {preset} failed: {message}", file=sys.stderr)
    if args.output == "md":
        text = kld_markdown(finished.rows, finished.reference_note)
    elif args.output == "json":
        text = json.dumps({"format": "workbench-bench-kld/1", "reference": finished.reference_note,
                           "rows": [asdict(r) for r in finished.rows]}, indent=2) + "\n"
    elif args.output == "jsonl":
        text = "".join(json.dumps(asdict(r)) + "\n" for r in finished.rows)
    else:

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(KLD_FIELDS)
        writer.writerows([getattr(r, name) for name in KLD_FIELDS] for r in finished.rows)
        text = out.getvalue()
    _emit(args, text)
    for row in finished.rows:
        if row.flag:
            print(f"workbench: WARNING {row.preset}: {row.flag}", file=sys.stderr)
    return 1 if finished.failures else 0


def _eval_text(args: argparse.Namespace) -> str | None:
    if not args.eval_text:
        return None
    try:
        return read_regular_file(args.eval_text, max_bytes=64 * MIB, what="an evaluation text",
                                 fix="give a UTF-8 text file").decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise WorkbenchError(f"cannot read the evaluation text ({error})", where=args.eval_text,
                             fix="give a UTF-8 text file") from error


def _emit(args: argparse.Namespace, text: str) -> None:
    sys.stdout.write(text)
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as error:
            raise WorkbenchError(f"cannot write the results ({error.strerror or error})", where=args.out,
                                 fix="choose a writable --out path") from error
        print(f"wrote {args.out}", file=sys.stderr)


def _run_task(args: argparse.Namespace) -> int:


    task = find_task(args.task)
    presets = _presets(args) if args.presets else (_default_task_preset(),)
    if args.threads:
        presets = tuple(dataclasses.replace(p, threads=t) for p in presets for t in _int_list(args.threads, "--threads"))
    device = load_device(args.device)
    if args.power_cap is not None and args.power_cap <= 0:
        raise WorkbenchError(f"--power-cap {args.power_cap:g} must be positive", where="bench", fix="e.g. --power-cap 10")
    settings, limits = _dvfs_settings(args)
    config = TaskSweepConfig(
        model_path=resolve_model(args.model),
        presets=presets,
        device=device,
        task=task,
        samples=_int_list(args.samples, "--samples"),
        limit=args.limit,
        seed=args.seed,
        dvfs=settings,
        dvfs_limits=limits,
        telemetry_root=args.sysfs_root,
    )
    info = read_gguf(config.model_path)
    for preset in presets:  # N samples are N sequences of one context: the ledger for each N
        for n_samples in config.samples:
            ledger = predict_ledger(info, dataclasses.replace(preset, parallel=max(n_samples, preset.parallel)), device)
            print(sequences_ledger_line(ledger), file=sys.stderr)
    cancel = threading.Event()
    if limits is not None:
        with limits_held(limits):
            finished = _follow_task_sweep(config, cancel)
    else:
        finished = _follow_task_sweep(config, cancel)
    for failure in finished.failures:
        print(f"workbench: {failure.label} failed: {failure.message}", file=sys.stderr)
    if not finished.rows:
        raise WorkbenchError("no point could be measured", where="bench --task", fix="see the errors above")
    machine = machine_to_dict(describe_machine(device, None, root=args.sysfs_root))
    _emit(args, _render(finished, args.output, machine, device))
    _show_unparseable(finished)
    if args.power_cap is not None:
        print(choose_under_cap(finished.rows, args.power_cap).message)
    return 1 if finished.failures else 0


def _follow_task_sweep(config, cancel):
    finished = None
    try:
        for event in run_task_sweep(config, cancel):
            if isinstance(event, TaskStepStarted):
                draw_bar(sys.stderr, event.done, event.total, event.label)
            elif isinstance(event, TaskPointMeasured):
                row = event.row
                draw_bar(sys.stderr, 0, 0, f"{row.preset}, N={row.samples}: accuracy {row.accuracy:.2f} "
                          f"({row.correct}/{row.questions}), {row.seconds_per_question:.2f} s/question", done_line=True)
            elif isinstance(event, TaskPointFailed):
                draw_bar(sys.stderr, 0, 0, f"{event.label}: failed", done_line=True)
            elif isinstance(event, TaskSweepFinished):
                finished = event
    except KeyboardInterrupt:
        cancel.set()
        raise
    assert finished is not None
    return finished


def _render(finished, fmt: str, machine: dict, device) -> str:
    if fmt == "json":
        outcomes = {key: [_outcome_dict(o) for o in items] for key, items in finished.outcomes.items()}
        return task_json(finished.rows, machine, outcomes)
    return render_task_rows(finished.rows, fmt, machine, battery=getattr(device, "battery_wh", None) is not None)


def _outcome_dict(outcome) -> dict:
    return asdict(outcome)


def _show_unparseable(finished) -> None:
    """Unparseable answers count as wrong; show them, so that the extractor is never a silent judge."""
    shown = 0
    for key, outcomes in finished.outcomes.items():
        for outcome in outcomes:
            for text in outcome.unparseable_texts:
                if shown < 10:
                    snippet = " ".join(text.split())[:80]
                    print(f"unparseable ({key}, question {outcome.index + 1}): {snippet!r}", file=sys.stderr)
                shown += 1
    if shown > 10:
        print(f"... {shown - 10} more unparseable answers (all counted wrong; --output json lists them)", file=sys.stderr)
