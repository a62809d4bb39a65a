"""`workbench bench`: a preset sweep with speed, memory, energy, heat and quality; `bench compare`."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from workbench.cli.split_output import add_rpc_argument


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="sweep presets: speed, memory, energy, temperature and perplexity side by side",
        description="Run each preset in a fresh engine process and print one row per preset. "
        "`workbench bench compare A.json B.json` merges result files from several machines, "
        "llama-bench's own -o json/jsonl output among them.",
    )
    parser.add_argument("--model", default="bundled", help="GGUF path or 'bundled' (default)")
    parser.add_argument("--presets", help="comma-separated preset names or TOML paths, e.g. quality-q8,balanced-q4km")
    parser.add_argument("--device", default="host", help="device profile name or TOML path (default: host)")
    parser.add_argument("-p", "--n-prompt", type=int, default=256, help="prompt tokens per run (default 256)")
    parser.add_argument("-n", "--n-gen", type=int, default=128, help="generated tokens per run (default 128)")
    parser.add_argument("-r", "--repetitions", type=int, default=3, help="timed runs per preset (default 3)")
    parser.add_argument("--output", choices=("md", "csv", "json", "jsonl"), default="md",
                        help="format (default md); json/jsonl are llama-bench's test rows (a pp and a tg row per "
                        "preset) with our figures beside them")
    parser.add_argument("--out", help="write the results to this file (the table still goes to stdout)")
    parser.add_argument("--soak", metavar="DURATION", help="after the sweep, generate for DURATION (30s, 10m) "
                        "per preset and report decode tok/s and temperature over time")
    parser.add_argument("--ppl-ctx", type=int, default=512, help="perplexity window in tokens (default 512)")
    parser.add_argument("--eval-text", help="evaluation text file (default: the shipped field guide)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random prompt tokens (default 0)")
    add_rpc_argument(parser)
    from workbench.cli.bench_modes import add_mode_arguments

    add_mode_arguments(parser)
    parser.set_defaults(func=run)
    sub = parser.add_subparsers(dest="bench_command", metavar="{compare,serve}")
    compare = sub.add_parser("compare", help="merge result files from several machines side by side")
    compare.add_argument("files", nargs="+",
                         help="json or jsonl files written by `workbench bench` or by `llama-bench -o json|jsonl`")
    compare.set_defaults(func=run_compare)
    from workbench.cli.cmd_bench_serve import add_serve_parser  # issue 16: the API load test

    add_serve_parser(sub)


def run_compare(args: argparse.Namespace) -> int:
    from workbench.core.bench.compare import compare_files, comparison_markdown

    sys.stdout.write(comparison_markdown(compare_files(args.files)))
    return 0


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.core.bench.report import render, write_results
    from workbench.core.bench.sweep import SweepConfig
    from workbench.core.config.devices import load_device
    from workbench.core.errors import WorkbenchError
    from workbench.core.files.model_ref import resolve_model
    from workbench.core.config.presets import load_preset
    from workbench.cli.bench_modes import restore_killed_sweep, run_mode

    restore_killed_sweep(args)
    if args.task or args.kld or args.cpu_max_freq or args.governor or args.power_cap is not None:
        return run_mode(args)
    if not args.presets:
        raise WorkbenchError("no presets to compare", where="bench",
                             fix="pass --presets a,b,c (see `workbench presets`)")
    presets = tuple(load_preset(spec.strip()) for spec in args.presets.split(",") if spec.strip())
    if not presets:
        raise WorkbenchError(f"--presets {args.presets!r} names no preset", where="bench",
                             fix="pass --presets a,b,c (see `workbench presets`)")
    from workbench.cli.split_output import rpc_endpoints

    rpc = rpc_endpoints(args)
    if rpc:  # the nodes travel with each preset into its engine; their profiles stay for the prediction
        import dataclasses

        presets = tuple(dataclasses.replace(p, rpc=tuple(e.address for e in rpc)) for p in presets)
    if args.out:
        _check_writable(Path(args.out))
    soak_seconds = None
    if args.soak:
        from workbench.core.bench.soak import parse_duration

        soak_seconds = parse_duration(args.soak)
    eval_text = None
    if args.eval_text:
        from workbench.core.files.regular import MIB, read_regular_file

        try:
            eval_text = read_regular_file(args.eval_text, max_bytes=64 * MIB, what="an evaluation text",
                                          fix="give a UTF-8 text file").decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise WorkbenchError(f"cannot read the evaluation text ({error})", where=args.eval_text,
                                 fix="give a UTF-8 text file") from error
    config = SweepConfig(
        model_path=resolve_model(args.model),
        presets=presets,
        device=load_device(args.device),
        n_prompt=args.n_prompt,
        n_gen=args.n_gen,
        repetitions=args.repetitions,
        seed=args.seed,
        eval_text=eval_text,
        ppl_ctx=args.ppl_ctx,
        rpc=rpc,
    )
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
    return 1 if failures else 0


def _check_writable(target) -> None:
    """Refuse an --out the sweep could not write before the sweep, not after minutes of it."""
    import os

    from workbench.core.errors import WorkbenchError

    folder = target.parent if str(target.parent) else target.cwd()
    if target.is_dir():
        raise WorkbenchError("is a folder, not a file", where=str(target), fix="give --out a file name, e.g. --out sweep.json")
    if not folder.is_dir():
        raise WorkbenchError("no such folder for --out", where=str(folder), fix="create it first or choose another --out path")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise WorkbenchError("cannot write there", where=str(target), fix="choose a writable --out path")


def sweep_with_progress(config, stream: TextIO):
    """Run the sweep drawing a one-line progress bar on `stream`; returns (results, failures)."""
    from workbench.core.bench.sweep import (
        PresetFailed,
        PresetMeasured,
        SweepFinished,
        SweepStepStarted,
        run_sweep,
    )

    finished = None
    last_label = ""
    for event in run_sweep(config):
        if isinstance(event, SweepStepStarted):
            label = f"{event.preset}: {event.step}" + (f" {event.fraction:.0%}" if event.fraction > 0 else "")
            if label != last_label:  # stages such as "quantizing" repeat with each fraction
                _draw_bar(stream, event.done_steps, event.total_steps, label)
            last_label = label
        elif isinstance(event, PresetMeasured):
            row = event.row
            _draw_bar(stream, 0, 0, f"{row.preset}: {row.decode_tps:.1f} tok/s decode", done_line=True)
        elif isinstance(event, PresetFailed):
            _draw_bar(stream, 0, 0, f"{event.preset}: failed", done_line=True)
        elif isinstance(event, SweepFinished):
            finished = event
    assert finished is not None
    return finished.results, finished.failures


def _draw_bar(stream: TextIO, done: int, total: int, label: str, *, done_line: bool = False) -> None:
    width = 30
    if done_line:
        stream.write(f"\r\x1b[2K{label}\n" if stream.isatty() else f"{label}\n")
    else:
        filled = int(width * done / total) if total else 0
        text = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"
        stream.write(f"\r\x1b[2K{text}" if stream.isatty() else f"{text}\n")
    stream.flush()


def _soak_all(config, seconds: float) -> None:
    """Soak each preset in turn in a fresh engine; intervals stream to stdout as they finish."""
    from workbench.core.bench.soak import SoakInterval, SoakResult
    from workbench.core.bench.soak_runner import soak_preset

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
