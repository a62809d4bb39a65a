"""`workbench bench` as a speed sweep: presets in turn, a progress bar, the table, and the optional soak."""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
from pathlib import Path
from typing import TextIO

from workbench.cli.progress_bar import draw_bar
from workbench.cli.split_output import rpc_endpoints
from workbench.core.bench.backend_sweep import backend_plan, parse_backends
from workbench.core.bench.report import render, simulated_board_note, write_results
from workbench.core.bench.soak import SoakInterval, SoakResult, parse_duration
from workbench.core.bench.soak_runner import soak_preset
from workbench.core.bench.sweep import (
    PresetFailed,
    PresetMeasured,
    SweepConfig,
    SweepFinished,
    SweepStepStarted,
    run_sweep,
)
from workbench.core.config.device_accelerator import offload_problems
from workbench.core.config.devices import load_device
from workbench.core.config.host import profile_is_this_machine
from workbench.core.config.presets import load_preset
from workbench.core.engine.backends import loaded_backends
from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import resolve_model
from workbench.core.files.regular import MIB, read_regular_file


def run_speed(args: argparse.Namespace) -> int:
    """The preset sweep: one row per preset, each in a fresh engine; then the soak, when asked."""
    if not args.presets:
        raise WorkbenchError("no presets to compare", where="bench",
                             fix="pass --presets a,b,c (see `workbench presets`)")
    presets = tuple(load_preset(spec.strip()) for spec in args.presets.split(",") if spec.strip())
    if not presets:
        raise WorkbenchError(f"--presets {args.presets!r} names no preset", where="bench",
                             fix="pass --presets a,b,c (see `workbench presets`)")

    refused: tuple[tuple[str, str], ...] = ()
    if args.backends:
        plan = backend_plan(presets, parse_backends(args.backends), loaded_backends(),
                            "See `workbench doctor` for the rebuild command")
        presets, refused = plan.presets, plan.refused
        for name, why in refused:
            print(f"workbench: {name}: {why}", file=sys.stderr)
        if not presets:
            raise WorkbenchError("no backend of --backends can run here", where="bench", fix="See the lines above")
    device = load_device(args.device)
    if not profile_is_this_machine(device.name):
        print(f"workbench: {simulated_board_note(device.name, platform.node())} This sweep stays out of the "
              "board's speed history.", file=sys.stderr)
    for preset in presets:
        for _, message, fix in offload_problems(preset, device):
            print(f"workbench: {preset.name}: warning: {message}. {fix}", file=sys.stderr)

    rpc = rpc_endpoints(args)
    if rpc:  # the nodes travel with each preset into its engine; their profiles stay for the prediction

        presets = tuple(dataclasses.replace(p, rpc=tuple(e.address for e in rpc)) for p in presets)
    if args.out:
        _check_writable(Path(args.out))
    soak_seconds = None
    if args.soak:
        soak_seconds = parse_duration(args.soak)
    eval_text = None
    if args.eval_text:
        try:
            eval_text = read_regular_file(args.eval_text, max_bytes=64 * MIB, what="an evaluation text",
                                          fix="give a UTF-8 text file").decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise WorkbenchError(f"cannot read the evaluation text ({error})", where=args.eval_text,
                                 fix="give a UTF-8 text file") from error
    config = SweepConfig(
        model_path=resolve_model(args.model),
        presets=presets,
        device=device,
        n_prompt=args.n_prompt,
        n_gen=args.n_gen,
        repetitions=args.repetitions,
        seed=args.seed,
        eval_text=eval_text,
        ppl_ctx=args.ppl_ctx,
        rpc=rpc,
        reference=check_reference(args.reference, presets),
        perplexity=not args.no_perplexity,
    )
    check_gates(args)
    results, failures = sweep_with_progress(config, sys.stderr)
    for failure in failures:
        print(f"workbench: {failure.preset} failed: {failure.message}", file=sys.stderr)
    if not results.rows:
        raise WorkbenchError("no preset could be measured", where="bench", fix="see the errors above")
    if args.out:
        sys.stdout.write(render(results, "md"))  # first: a failing write must not lose the sweep
        sys.stdout.flush()
        write_results(results, args.output, args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(render(results, args.output))
    if soak_seconds is not None:
        _soak_all(config, soak_seconds)
    missed = gate_failures(results.rows, args.fail_below, args.fail_above_ppl)
    for line in missed:
        print(f"workbench: {line}", file=sys.stderr)
    return EXIT_GATE if missed else (1 if failures or refused else 0)


EXIT_GATE = 3  # a row missed --fail-below or --fail-above-ppl (README); 1: a preset failed, 2: bad input


def check_reference(name: str | None, presets) -> str | None:
    """--reference must name a preset of this bench (its name, as the rows carry it)."""
    if name is None:
        return None
    names = [preset.name for preset in presets]
    if name not in names:
        raise WorkbenchError(f"--reference {name} is not one of this bench's presets", where="bench",
                             fix=f"Name one of: {', '.join(names)}")
    return name


def check_gates(args) -> None:
    if args.fail_below is not None and not args.fail_below > 0:
        raise WorkbenchError(f"--fail-below {args.fail_below} is no decode rate", fix="Give tokens/s above 0, e.g. 10")
    if args.fail_above_ppl is not None:
        if not args.fail_above_ppl > 1:
            raise WorkbenchError(f"--fail-above-ppl {args.fail_above_ppl} is no perplexity (they are above 1)",
                                 fix="Give e.g. --fail-above-ppl 20")
        if args.no_perplexity:
            raise WorkbenchError("--fail-above-ppl needs the perplexity that --no-perplexity skips",
                                 fix="Drop one of the two")


def gate_failures(rows, fail_below: float | None, fail_above_ppl: float | None) -> list[str]:
    """One line per row that misses a gate: decode under --fail-below, perplexity over (or without) --fail-above-ppl."""
    missed = []
    for row in rows:
        if fail_below is not None and row.decode_tps < fail_below:
            missed.append(f"{row.preset}: decode {row.decode_tps:.2f} tok/s is below --fail-below {fail_below:g}")
        if fail_above_ppl is not None and (row.ppl is None or row.ppl > fail_above_ppl):
            measured = "not measured" if row.ppl is None else f"{row.ppl:.3f}"
            missed.append(f"{row.preset}: perplexity {measured} is above --fail-above-ppl {fail_above_ppl:g}"
                          if row.ppl is not None else f"{row.preset}: perplexity {measured}, so --fail-above-ppl "
                          "cannot pass")
    return missed


def _check_writable(target) -> None:
    """Refuse an --out the sweep could not write before the sweep, not after minutes of it."""
    folder = target.parent if str(target.parent) else target.cwd()
    if target.is_dir():
        raise WorkbenchError("is a folder, not a file", where=str(target), fix="give --out a file name, e.g. --out sweep.json")
    if not folder.is_dir():
        raise WorkbenchError("no such folder for --out", where=str(folder), fix="create it first or choose another --out path")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise WorkbenchError("cannot write there", where=str(target), fix="choose a writable --out path")


def sweep_with_progress(config, stream: TextIO):
    """Run the sweep drawing a one-line progress bar on `stream`; returns (results, failures)."""
    finished = None
    last_label = ""
    for event in run_sweep(config):
        if isinstance(event, SweepStepStarted):
            label = f"{event.preset}: {event.step}" + (f" {event.fraction:.0%}" if event.fraction > 0 else "")
            if label != last_label:  # stages such as "quantizing" repeat with each fraction
                draw_bar(stream, event.done_steps, event.total_steps, label)
            last_label = label
        elif isinstance(event, PresetMeasured):
            row = event.row
            draw_bar(stream, 0, 0, f"{row.preset}: {row.decode_tps:.1f} tok/s decode", done_line=True)
            if event.prediction_check:
                draw_bar(stream, 0, 0, f"{row.preset}: {event.prediction_check}", done_line=True)
        elif isinstance(event, PresetFailed):
            draw_bar(stream, 0, 0, f"{event.preset}: failed", done_line=True)
        elif isinstance(event, SweepFinished):
            finished = event
    assert finished is not None
    return finished.results, finished.failures


def _soak_all(config, seconds: float) -> None:
    """Soak each preset in turn in a fresh engine; intervals stream to stdout as they finish."""

    for preset in config.presets:
        print(f"\nSoak {preset.name} for {seconds:.0f} s:")
        print("| t s | decode t/s | prefill t/s | peak °C | throttled | W |")
        print("|---|---|---|---|---|---|")
        for event in soak_preset(config, preset, seconds):
            if isinstance(event, SoakInterval):
                print(
                    f"| {event.elapsed_s:.0f} | {event.decode_tps:.2f} | {event.prefill_tps:.1f} | "
                    f"{_maybe(event.temp_c, '.1f')} | {_yes_no(event.throttled)} | {_maybe(event.power_w, '.2f')} |",
                    flush=True,
                )
            elif isinstance(event, SoakResult):
                for name, why in event.unavailable:
                    print(f"n/a {name}: {why}")
                flag = "WARNING: " if event.flagged else ""
                print(f"{flag}{event.preset}: {event.verdict}")


def _maybe(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _yes_no(value: bool | None) -> str:
    return "n/a" if value is None else ("YES" if value else "no")
