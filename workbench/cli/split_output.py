"""The per-device ledger for the headless commands: --rpc parsing, the probe, text and JSON."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.text_table import format_table, wrap_text
from workbench.core.config.rpc_endpoints import parse_rpc_option
from workbench.core.rpc.nodes import predict_devices as predict
from workbench.core.units import MIB


def add_rpc_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rpc", metavar="HOST:PORT[@PROFILE],...", default="",
                        help="llama.cpp RPC nodes to split the model over (replaces the preset's rpc list); "
                        "a node's budget comes from its device profile after @, else from the free memory it reports")


def predict_devices(*args: Any, **kwargs: Any) -> tuple[Any, tuple]:
    return predict(*args, **kwargs)


def rpc_endpoints(args: argparse.Namespace) -> tuple:
    return parse_rpc_option(args.rpc) if getattr(args, "rpc", "") else ()


def _decode_json(bound: Any) -> dict:
    return {
        "tokens_per_s": bound.tokens_per_s,
        "seconds_per_token": bound.seconds_per_token if bound.terms and not bound.missing else None,
        "terms": [{"what": t.what, "seconds": t.seconds, "source": t.source} for t in bound.terms],
        "network_seconds": bound.network_seconds,
        "dominant": bound.dominant(),
        "missing": list(bound.missing),
    }


def _rate_json(rate: Any) -> dict | None:
    if rate is None:
        return None
    return {
        "tokens_per_s": rate.tokens_per_s,
        "seconds_per_token": rate.seconds_per_token if rate.terms and not rate.missing else None,
        "terms": [{"what": t.what, "seconds": t.seconds, "source": t.source} for t in rate.terms],
        "missing": list(rate.missing),
        "basis": rate.basis,
    }


def devices_json(split: Any) -> list[dict]:
    """`ledger --json`'s `devices`: one object per device, the host first."""
    return [{
        "name": device.name,
        "endpoint": device.endpoint or None,
        "layers": len(device.layers),
        "layer_range": [device.layers[0], device.layers[-1]] if device.layers else None,
        "holds_output": device.holds_output,
        "weights_bytes": device.weights_bytes,
        "kv_bytes": device.kv_bytes,
        "compute_bytes": device.compute_bytes,
        "overhead_bytes": device.overhead_bytes,
        "total_bytes": device.total_bytes,
        "budget_bytes": device.budget_bytes,
        "budget_source": device.budget_source or None,
        "headroom_bytes": device.headroom_bytes,
        "verdict": device.verdict,
        "reason": device.reason,
    } for device in split.devices]


def split_json(split: Any, reports: tuple) -> dict:
    return {
        "verdict": split.verdict,
        "reason": split.reason,
        "n_gpu_layers": split.n_gpu_layers,
        "splits": list(split.splits),
        "splits_source": split.splits_source,
        "max_ctx": split.max_ctx,
        "best_tensor_split": list(split.best_tensor_split) or None,
        "decode_empty_context": _decode_json(split.decode_empty),
        "decode_full_context": _decode_json(split.decode_full),
        "predicted_decode_empty_context": _rate_json(split.rate_empty),
        "predicted_decode_full_context": _rate_json(split.rate_full),
        "nodes": [{"endpoint": r.address, "reachable": r.reachable, "reason": r.reason,
                   "free_bytes": r.free_bytes, "total_bytes": r.total_bytes, "latency_s": r.latency_s,
                   "link_bytes_per_s": r.link_bytes_per_s} for r in reports],
    }


def _mb(n_bytes: int | None) -> str:
    return "unknown" if n_bytes is None else f"{n_bytes / MIB:,.0f}"


def devices_text(split: Any, reports: tuple, width: int | None = None) -> str:
    out = ["\n"]
    for report in reports:
        if not report.reachable:
            out.append(wrap_text(f"RPC node {report.address}: unreachable ({report.reason}); its budget can only come "
                                 "from a profile", width) + "\n")
    rows = []
    for device in split.devices:
        held = f"{device.layers[0]}-{device.layers[-1]}" if device.layers else "-"
        held += " +out" if device.holds_output else ""
        rows.append((device.name + (f" {device.endpoint}" if device.endpoint else ""), held, _mb(device.weights_bytes),
                     _mb(device.kv_bytes), _mb(device.compute_bytes), _mb(device.overhead_bytes or None) if device.overhead_bytes else "",
                     _mb(device.total_bytes), "in host" if device.budget_source.startswith("shares") else
                     _mb(device.budget_bytes), device.verdict))
    out.append(f"per device (layers split by {split.splits_source}):\n")
    out.append(format_table(("DEVICE", "LAYERS", "WEIGHTS", "KV", "COMPUTE", "OVERHEAD", "TOTAL MB", "BUDGET", "VERDICT"),
                            rows, right=(2, 3, 4, 5, 6, 7)))
    out.append(wrap_text(f"split verdict: {split.verdict.upper()} — {split.reason}", width) + "\n")
    out.append(f"largest context every device fits: {split.max_ctx:,}\n" if split.max_ctx else
               "largest context every device fits: none (or a budget is unknown)\n")
    if split.best_tensor_split:
        out.append(f"balanced split: tensor_split = [{', '.join(str(n) for n in split.best_tensor_split)}] "
                   "(layers per device, equal headroom share)\n")
    for label, bound in (("empty", split.decode_empty), ("full", split.decode_full)):
        if bound.tokens_per_s is None:
            missing = ", ".join(bound.missing) or "no figures"
            out.append(wrap_text(f"decode bound at {label} context: unavailable ({missing})", width) + "\n")
            continue
        network = bound.network_seconds
        out.append(wrap_text(f"decode bound at {label} context: {bound.tokens_per_s:,.1f} tok/s "
                             f"({bound.seconds_per_token * 1000:.2f} ms/token, network {network * 1000:.2f} ms); "
                             f"{bound.dominant()}", width) + "\n")
    for label, rate in (("empty", split.rate_empty), ("full", split.rate_full)):
        if rate is not None:
            out.append(wrap_text(rate_line(rate, label), width) + "\n")
    return "".join(out)


def rate_line(rate: Any, label: str) -> str:
    """The speed model's predicted decode rate of a split, with its basis, or why it is unavailable."""
    if rate.tokens_per_s is None:
        return f"predicted decode at {label} context: unavailable ({', '.join(rate.missing) or 'no figures'})"
    return (f"predicted decode at {label} context: {rate.tokens_per_s:,.1f} tok/s "
            f"({rate.seconds_per_token * 1000:.2f} ms/token; speed model: {rate.basis})")


def loaded_devices_text(loaded: Any) -> str:
    """After a load with devices: llama.cpp's buffers per device, one line each."""
    lines = []
    for device in loaded.devices:
        where = f" [{device.endpoint}]" if device.endpoint else ""
        lines.append(f"  {device.name}{where}: model {device.model_bytes / MIB:.1f} MiB, KV {device.kv_bytes / MIB:.1f} MiB, "
                     f"compute {device.compute_bytes / MIB:.1f} MiB" + (
                         f", output {device.output_bytes / MIB:.2f} MiB" if device.output_bytes else ""))
    return "llama.cpp buffers per device:\n" + "\n".join(lines)
