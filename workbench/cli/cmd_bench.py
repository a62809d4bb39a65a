"""`workbench bench`: a preset sweep with speed, memory, energy, heat and quality; `bench compare`."""

from __future__ import annotations

import argparse
import sys

from workbench.cli.bench_modes import add_mode_arguments, restore_killed_sweep, run_mode
from workbench.cli.bench_speed import run_speed
from workbench.cli.cmd_bench_serve import add_serve_parser
from workbench.cli.split_output import add_rpc_argument
from workbench.core.bench.compare import compare_files, comparison_markdown


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
    parser.add_argument("--no-perplexity", action="store_true",
                        help="skip the perplexity step (most of a short sweep's time); ppl and Δppl read n/a")
    parser.add_argument("--reference", metavar="PRESET",
                        help="the preset Δppl and speedup are against (default: the one running the model file as is)")
    parser.add_argument("--fail-below", type=float, metavar="TOKPS",
                        help="exit 3 when a preset decodes slower than TOKPS tokens/s (a script's gate)")
    parser.add_argument("--fail-above-ppl", type=float, metavar="PPL",
                        help="exit 3 when a preset's perplexity is above PPL (or was not measured)")
    parser.add_argument("--eval-text", help="evaluation text file (default: the shipped field guide)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random prompt tokens (default 0)")
    parser.add_argument("--backends", metavar="cpu,gpu",
                        help="run each preset per backend, rows side by side: cpu = gpu_layers 0, gpu = every layer "
                        "on the GPU (refused, with the reason, when the loaded llama.cpp has no GPU device)")
    add_rpc_argument(parser)
    add_mode_arguments(parser)
    parser.set_defaults(func=run)
    sub = parser.add_subparsers(dest="bench_command", metavar="{compare,serve}")
    compare = sub.add_parser("compare", help="merge result files from several machines side by side")
    compare.add_argument("files", nargs="+",
                         help="json or jsonl files written by `workbench bench` or by `llama-bench -o json|jsonl`")
    compare.set_defaults(func=run_compare)

    add_serve_parser(sub)


def run_compare(args: argparse.Namespace) -> int:
    sys.stdout.write(comparison_markdown(compare_files(args.files)))
    return 0


def run(args: argparse.Namespace) -> int:
    restore_killed_sweep(args)
    if args.task or args.kld or args.cpu_max_freq or args.governor or args.power_cap is not None:
        return run_mode(args)
    return run_speed(args)
