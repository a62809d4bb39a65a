"""`workbench presets`: list quantization presets; `presets show NAME`: its TOML and llama-server command."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from workbench.cli import text_table
from workbench.cli.json_output import write_json
from workbench.cli.text_table import fitted_table
from workbench.core.config.cpu_topology import format_cpu_list
from workbench.core.config.preset_cores import core_choice
from workbench.core.config.presets import (
    llama_server_command,
    load_preset,
    preset_catalog,
    preset_origin,
    preset_to_toml,
    resolve_threads,
    revert_user_preset,
    user_presets_dir,
)
from workbench.core.files.model_ref import resolve_model


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "presets",
        help="list quantization presets (shipped and your own)",
        description="List the shipped and user presets (a user preset replaces a shipped one of the same "
        "name). `workbench presets show NAME` prints one as TOML with its llama-server command.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)
    actions = parser.add_subparsers(dest="presets_action", metavar="show|revert")
    show = actions.add_parser("show", help="print a preset's TOML and the equivalent llama-server command")
    show.add_argument("preset", help="preset name or path to a TOML file")
    show.add_argument("--model", help="model for the command line: a GGUF path or 'bundled' (default: MODEL.gguf)")
    show.add_argument("--legacy-flags", action="store_true",
                      help="spell -fa/--mlock/--no-mmap as llama-server builds before --load-mode did")
    show.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    show.set_defaults(func=run_show)
    revert = actions.add_parser("revert", help="bring back a shipped preset that a user preset of its name replaces")
    revert.add_argument("preset", help="the shipped preset's name")
    revert.set_defaults(func=run_revert)


def _row(preset, origin: str) -> dict:
    return {**asdict(preset), "origin": origin}


def run(args: argparse.Namespace) -> int:
    catalog = preset_catalog()
    presets = catalog.entries
    # A malformed file is named on a line of its own; the others are listed all the same.
    broken = "".join(f"{file.line}\n" for file in catalog.broken)
    if args.json:
        write_json([_row(p, preset_origin(p)) for p in presets])
        sys.stderr.write(broken)
        return 0
    sys.stdout.write(presets_table(presets, text_table.terminal_width()) + broken)
    sys.stdout.write(f"\nUser presets live in {user_presets_dir()}\n(same name = replaces the shipped one).\n")
    return 0


def presets_table(presets, width: int | None = None) -> str:
    """One row per preset; on a terminal narrower than that, each description goes on its own
    indented line under its row (80 columns otherwise wrap every row)."""

    headers = ("NAME", "WEIGHTS", "CTX", "K/V CACHE", "FLASH ATTN", "SOURCE", "DESCRIPTION")
    rows = [
        (p.name, p.weights, p.ctx_size, f"{p.cache_type_k}/{p.cache_type_v}", "on" if p.flash_attn else "off",
         preset_origin(p), p.description)
        for p in presets
    ]
    return fitted_table(headers, rows, width, right=(2,), details={6: ""})


def run_show(args: argparse.Namespace) -> int:
    preset = load_preset(args.preset)
    model_path = "MODEL.gguf"
    if args.model:
        model_path = str(resolve_model(args.model))
    command = llama_server_command(preset, model_path, legacy_flags=args.legacy_flags)
    if getattr(args, "json", False):
        write_json({"preset": _row(preset, preset_origin(preset)), "toml": preset_to_toml(preset),
                    "llama_server_command": command})
        return 0
    sys.stdout.write(f"# {preset.name} ({preset_origin(preset)}: {preset.source or 'built in'})\n")
    sys.stdout.write(preset_to_toml(preset))
    note = f"  (threads = 0 resolved to {resolve_threads(preset)} for this machine)" if preset.threads == 0 else ""
    pinned = core_choice(preset).cpus
    note += f"  (pinned to CPUs {format_cpu_list(pinned)})" if pinned and not preset.cpu_cores else ""
    sys.stdout.write(f"\n# llama-server equivalent{note}:\n{command}\n")
    return 0


def run_revert(args: argparse.Namespace) -> int:
    kept = revert_user_preset(args.preset)
    sys.stdout.write(f"{args.preset}: the shipped preset is back; your version is kept as {kept}\n")
    return 0

