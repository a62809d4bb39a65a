"""`workbench ledger MODEL [--preset P] [--device D]`: the predicted memory ledger and whether it fits."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import asdict

from workbench.cli import text_table
from workbench.cli.json_output import write_json
from workbench.cli.recurrent_text import recurrent_rows
from workbench.cli.speed_text import speed_json, speed_line
from workbench.cli.split_output import (
    add_rpc_argument,
    devices_json,
    devices_text,
    predict_devices,
    rpc_endpoints,
    split_json,
)
from workbench.cli.text_table import format_table, wrap_text
from workbench.core.config.device_accelerator import offload_problems
from workbench.core.config.devices import load_device
from workbench.core.config.limits import ctx_problem
from workbench.core.config.presets import MAX_PARALLEL, Problem, load_preset, preset_problems
from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import resolve_model
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.llama_build import VERIFIED_ON
from workbench.core.ledger.placement_fixes import with_placement_fixes
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.speed_history import speed_correction
from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.ledger.verdict_text import verdict_sentence
from workbench.core.rpc.nodes import node_profiles, rpc_device
from workbench.core.units import MIB

EXIT_DOES_NOT_FIT = 3  # documented in the README: a script can gate on it (2 is bad input)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ledger",
        help="predict the memory a model + preset needs on a device, and whether it fits",
        description="Predict weights, KV cache, compute buffer and overhead for MODEL run with PRESET, "
        "against DEVICE's budget (its RAM minus reserves). Nothing is loaded. Exits 0 when it fits (or is tight), "
        f"{EXIT_DOES_NOT_FIT} when it does not fit, 2 on bad input.",
    )
    parser.add_argument("model", help="a .gguf path, or 'bundled' for the demo model")
    parser.add_argument("--preset", default="as-is", help="preset name or TOML path (see `workbench presets`; "
                        "default: as-is, the file unchanged)")
    parser.add_argument("--device", default="host", help="device name or TOML path (see `workbench devices`; default: host)")
    parser.add_argument("--ctx", type=int, help="context size in tokens to use instead of the preset's "
                        "(0 = the model's trained context, as llama.cpp's -c 0)")
    parser.add_argument("--parallel", type=int, metavar="N", help="sequences decoded together instead of the "
                        "preset's (llama-server -np): the KV streams, window cells and recurrent state for N")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_rpc_argument(parser)
    parser.set_defaults(func=run)


def ledger_json(ledger) -> dict:
    data = asdict(ledger)
    data["reserves_bytes"] = dict(ledger.reserves_bytes)
    data["max_ctx_by_kv_type"] = dict(ledger.max_ctx_by_kv_type)
    data["decode_tps_bound"] = {"empty_context": round(ledger.decode_tps_bound[0], 2),
                                "full_context": round(ledger.decode_tps_bound[1], 2)}
    data.update(speed_json(ledger.speed))
    return data


def mb_text(n_bytes: int) -> str:
    """Bytes as whole MiB with thousands separators, the unit of the ledger tables."""
    return f"{n_bytes / MIB:,.0f}"


def ledger_text(ledger, weights: str, bandwidth_gbs: float, n_ctx_train: int = 0, width: int | None = None) -> str:
    rows = [("total RAM", mb_text(ledger.ram_total_bytes), ledger.device)]
    rows += [(f"reserve: {name.replace('_', ' ')}", f"-{mb_text(n)}", "device profile") for name, n in ledger.reserves_bytes]
    rows.append(("left for the LLM", mb_text(ledger.budget_bytes), "budget"))
    rows.append(("", "", ""))
    rows.append(("weights", mb_text(ledger.weights_bytes), f"{weights}" + (" (file as is)" if weights == "keep" else " (predicted re-quantization)")))
    if ledger.cpu_repack_bytes:
        rows.append(("CPU_REPACK copy", mb_text(ledger.cpu_repack_bytes),
                     f"{'/'.join(ledger.cpu_repack_types)} weights, ggml-cpu repack"))
    rows.append(("KV cache", mb_text(ledger.kv_bytes), f"ctx {ledger.ctx_size}, {ledger.cache_type_k}/{ledger.cache_type_v}, "
                 f"{ledger.kv_bytes_per_token:,} B/token"))
    split = ledger.kv_split
    if split is not None:
        rows.append(("  global layers", mb_text(split.global_bytes),
                     f"{split.global_layers} layers x {split.global_cells:,} cells (full context)"))
        window = "full size: swa_full" if split.swa_full else f"window {split.n_swa:,} + ubatch, padded to 256"
        rows.append(("  window layers", mb_text(split.swa_bytes),
                     f"{split.swa_layers} layers x {split.swa_cells:,} cells ({window})"))
    rows += recurrent_rows(ledger, mb_text)
    # the llama.cpp build these two lines were verified on, or that the installed one is not it
    build = "UNVERIFIED build" if ledger.unverified else ledger.verified_on
    rows.append(("compute buffer", mb_text(ledger.compute_bytes), f"graph peak + logits; {build}"))
    rows.append(("runtime overhead", mb_text(ledger.overhead_bytes), f"measured; {build}"))
    rows.append(("total", mb_text(ledger.total_bytes), ""))
    rows.append(("headroom", mb_text(ledger.headroom_bytes), f"{ledger.headroom_bytes / ledger.budget_bytes:.0%} of budget"
                 if ledger.budget_bytes > 0 else ""))
    out = [wrap_text(f"{ledger.model} with preset {ledger.preset} on {ledger.device}", width) + "\n\n"]
    out.append(format_table(("LINE", "MiB", "SOURCE"), rows, right=(1,)))
    out.append("\n" + wrap_text(f"verdict: {verdict_sentence(ledger)}", width) + "\n")
    out.append(extras_text(ledger, width))
    max_ctx = ", ".join(f"{name} {ctx:,}" if ctx else f"{name} none" for name, ctx in ledger.max_ctx_by_kv_type)
    out.append(wrap_text(f"largest context that fits: {max_ctx}", width) + "\n")
    if n_ctx_train and any(ctx == n_ctx_train for _, ctx in ledger.max_ctx_by_kv_type):
        out.append(f"  (capped at the model's trained context of {n_ctx_train:,})\n")
    if any("+flash_attn" in name for name, _ in ledger.max_ctx_by_kv_type):
        out.append("  (+flash_attn: a quantized V cache needs flash_attn = true)\n")
    if bandwidth_gbs > 0:
        empty, full = ledger.decode_tps_bound
        out.append(wrap_text(f"decode bound at {bandwidth_gbs:g} GB/s: {empty:,.1f} tok/s at empty context, "
                             f"{full:,.1f} tok/s at full context", width) + "\n")
    else:
        out.append("decode bound: unavailable (the device profile has no memory bandwidth)\n")
    if ledger.speed is not None:
        out.append(wrap_text(speed_line(ledger.speed), width) + "\n")
        out.append(wrap_text(f"  basis: {ledger.speed.basis}", width) + "\n")
    return "".join(out)


def run(args: argparse.Namespace) -> int:
    if args.ctx is not None and ctx_problem(args.ctx):
        raise WorkbenchError(f"--ctx {args.ctx:,} {ctx_problem(args.ctx)}", fix="Give a context size in tokens, e.g. --ctx 4096")
    info = read_gguf(resolve_model(args.model))
    preset = load_preset(args.preset)
    if args.parallel is not None:
        if not 1 <= args.parallel <= MAX_PARALLEL:
            raise WorkbenchError(f"--parallel {args.parallel} is out of range", fix=f"Give 1 to {MAX_PARALLEL} sequences")
        preset = dataclasses.replace(preset, parallel=args.parallel)
    device = load_device(args.device)
    ledger = predict_ledger(info, preset, device, ctx_size=args.ctx, speed_correction=speed_correction(device.name))
    rpc = rpc_endpoints(args)
    # The fixes that move layers: to the profile's GPU, or to the --rpc nodes that have a profile.
    nodes = tuple(rpc_device(i, e, None, p) for i, (e, p) in enumerate(zip(rpc, node_profiles(rpc), strict=True)))
    ledger = with_placement_fixes(ledger, info, preset, device, nodes)
    # The preset as it would run: --ctx replaces its context (0 = the trained one, as llama.cpp does).
    problems = preset_problems(dataclasses.replace(preset, ctx_size=ledger.ctx_size), info) + tuple(
        Problem(level, message, fix) for level, message, fix in offload_problems(preset, device))

    split, reports = predict_devices(info, preset, device, rpc, ctx_size=args.ctx)
    if args.json:
        data = ledger_json(ledger)
        data["problems"] = [{"level": p.level, "message": p.message, "fix": p.fix} for p in problems]
        data["devices"] = devices_json(split)
        data["split"] = split_json(split, reports)
        write_json(data)
    else:
        width = text_table.terminal_width()
        sys.stdout.write(ledger_text(ledger, preset.weights, device.mem_bandwidth_gbs, info.n_ctx_train, width))
        if rpc or preset.rpc or any(d.layers or d.holds_output for d in split.devices[1:]):
            sys.stdout.write(devices_text(split, reports, width))
        sys.stdout.write(problems_text(problems, width))
    # A split over RPC nodes is judged by its per-device verdict, a local load by the ledger's.
    verdict = split.verdict if rpc or preset.rpc else ledger.verdict
    return EXIT_DOES_NOT_FIT if verdict == DOES_NOT_FIT else 0


def problems_text(problems, width: int | None = None) -> str:
    """The preset's errors and warnings for this model: a ledger that fits says nothing about
    a preset llama.cpp would refuse (a quantized V cache without flash attention, ...)."""
    return "".join(wrap_text(f"{p.level}: {p.message}. {p.fix}", width) + "\n" for p in problems)


def extras_text(ledger, width: int | None = None) -> str:
    """Resident memory, experts, the build the ledger was verified on, and the fixes when it does not fit."""

    out = []
    if ledger.resident is not None:
        resident = ledger.resident
        out.append(wrap_text(f"expected RSS after load: {mb_text(resident.after_load_bytes)} MiB "
                             f"({resident.after_load_source})", width))
        out.append(wrap_text(f"expected RSS after a full prompt: {mb_text(resident.after_prompt_bytes)} MiB "
                             f"({resident.after_prompt_source})", width))
    if ledger.experts is not None:
        experts = ledger.experts
        shared = f", {experts.shared} shared" if experts.shared else ""
        out.append(wrap_text(f"experts: {experts.total} per layer, {experts.used} used per token{shared}; all "
                             f"{mb_text(experts.expert_bytes)} MiB of experts are in memory, a token reads "
                             f"{mb_text(experts.active_bytes_per_token)} MiB (decode bound)", width))
    if ledger.unverified:
        out.append(wrap_text(f"warning: {ledger.unverified}", width))
    elif ledger.verified_on:
        out.append(wrap_text(f"compute and overhead lines verified on {VERIFIED_ON}", width))
    if ledger.fixes:
        out.append("to make it fit (cheapest first):")
        for fix in ledger.fixes:
            verdict = "fits" if fix.fits else "not enough alone"
            out.append(wrap_text(f"  {fix.change}: saves {mb_text(fix.saved_bytes)} MiB ({verdict}); cost: {fix.cost}",
                                 width))
    return "".join(line + "\n" for line in out)
