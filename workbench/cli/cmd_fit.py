"""`workbench fit MODEL|REPO --device D`: the preset that fits the device and loses the least quality."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from workbench.cli import text_table
from workbench.cli.cmd_ledger import ledger_json, ledger_text
from workbench.cli.fit_bench import measured_quality
from workbench.cli.fit_output import fit_json, fit_text
from workbench.cli.json_output import write_json
from workbench.cli.split_output import add_rpc_argument, rpc_endpoints
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset, save_user_preset
from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import BUNDLED, resolve_model
from workbench.core.fit.devices import fit_devices
from workbench.core.fit.options import fit_repo, local_options
from workbench.core.fit.quality import FLOORS
from workbench.core.fit.search import fit
from workbench.core.fit.types import DEFAULT_CTX_MIN, FitRequest
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.speed_history import speed_correction

NOTHING_FITS = 3  # the exit code of `ledger` when its verdict is DOES NOT FIT


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fit",
        help="choose the preset that fits a device and loses the least quality (before download for a hub repo)",
        description="Search weight type (a hub repository's files, or a local file as it is or re-quantized), "
        "context, K/V cache types with flash attention, swa_full, ubatch and, with RPC nodes or a GPU, "
        "gpu_layers; print the preset that fits every budget, meets --ctx-min and --min-tps and loses the "
        "least quality, with its ledger, what it changed and the next best choices. Nothing is loaded.",
    )
    parser.add_argument("model", help="a .gguf path, 'bundled', or a hub repository (owner/name)")
    parser.add_argument("--device", required=True, help="device profile name or TOML path (see `workbench devices`)")
    parser.add_argument("--preset", default="as-is", help="the preset to start from: its keys outside the search "
                        "(threads, batch, sampling, ...) are kept (default: as-is)")
    parser.add_argument("--ctx-min", type=int, default=DEFAULT_CTX_MIN,
                        help=f"the least context the choice must hold (default {DEFAULT_CTX_MIN}, llama.cpp's --fit-ctx)")
    parser.add_argument("--min-tps", type=float, help="the least predicted decode rate, tokens/s at empty context")
    parser.add_argument("--quality", choices=FLOORS, help="no weight or cache type below this many bits")
    parser.add_argument("--bench", metavar="FILE", help="your own `workbench bench` results (json/jsonl) for this "
                        "local model: their perplexity rows rank its weight types instead of the published table")
    parser.add_argument("--revision", default="main", help="hub repository revision (default: main)")
    parser.add_argument("--save", metavar="NAME", help="write the choice as user preset NAME")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_rpc_argument(parser)
    parser.set_defaults(func=run)


def _is_local(spec: str) -> bool:
    return spec.strip() == BUNDLED or spec.lower().endswith(".gguf") or Path(spec).expanduser().exists()


def run(args: argparse.Namespace) -> int:
    if args.ctx_min < 0:
        raise WorkbenchError(f"--ctx-min {args.ctx_min} is negative", fix="Give a context size in tokens, e.g. --ctx-min 4096")
    if args.min_tps is not None and not args.min_tps >= 0:
        raise WorkbenchError(f"--min-tps {args.min_tps} is not a rate", fix="Give tokens per second, e.g. --min-tps 5")
    device = load_device(args.device)
    base = dataclasses.replace(load_preset(args.preset), gpu_layers=None, rpc=(), tensor_split=(), source="")
    request = FitRequest(base=base, ctx_min=args.ctx_min, min_tps=args.min_tps, quality=args.quality,
                         devices=fit_devices(device, rpc_endpoints(args)), name=args.save or "fit")
    correction = speed_correction(device.name)
    if _is_local(args.model):
        path = resolve_model(args.model)
        model = read_gguf(path)
        if args.bench:
            request = dataclasses.replace(request, measured=measured_quality(args.bench, model))
        result = fit(local_options(model), device, request, correction)
        model_name, where = path.name, str(path)
    else:
        if args.bench:
            raise WorkbenchError("--bench is for a local model", where=args.model,
                                 fix="Download the file, bench it, then run `workbench fit FILE --bench RESULTS`")
        result = fit_repo(args.model, device, request, revision=args.revision, correction=correction)
        model_name = args.model
        where = result.chosen.option.filename if result.chosen else args.model
    saved = save_user_preset(result.chosen.preset) if args.save and result.chosen is not None else None
    if args.json:
        write_json(fit_json(result, ledger_json(result.chosen.ledger) if result.chosen else None, where))
        if result.chosen is None:
            sys.stderr.write(f"nothing fits: {result.reason}\n")
    else:
        width = text_table.terminal_width()
        sys.stdout.write(fit_text(result, model_name, device.name, where, base.name, request, width))
        if result.chosen is not None and result.chosen.split is None:  # a split's per-device ledger is above
            chosen = result.chosen
            sys.stdout.write("\n" + ledger_text(chosen.ledger, chosen.preset.weights, device.mem_bandwidth_gbs,
                                                chosen.option.model.n_ctx_train, width))
        if saved:
            sys.stdout.write(f"\nsaved as user preset {result.chosen.preset.name}: {saved}\n")
    if args.save and result.chosen is None:
        sys.stderr.write("nothing saved: nothing fits\n")
    elif saved and args.json:
        sys.stderr.write(f"saved as user preset {result.chosen.preset.name}: {saved}\n")
    return 0 if result.fits else NOTHING_FITS
