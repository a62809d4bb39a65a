"""`workbench inspect MODEL`: what a GGUF file holds, read from its header only."""

from __future__ import annotations

import argparse
import sys

from workbench.cli.inspect_attention import attention_json, attention_lines, attention_text
from workbench.cli.json_output import write_json
from workbench.cli.recurrent_text import layer_map_text
from workbench.cli.text_table import format_table
from workbench.core.files.model_ref import resolve_model
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.experts import expert_counts
from workbench.core.ledger.kv_layers import sliding_window
from workbench.core.ledger.recurrent import RS_TYPE, recurrent_state
from workbench.core.units import MIB, size


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="show a GGUF model's architecture, size, quantization mix and context",
        description="Read a GGUF file's header (no weights are loaded) and summarise it.",
    )
    parser.add_argument("model", help="a .gguf path, or 'bundled' for the demo model")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--tensors", action="store_true", help="also list every tensor")
    parser.set_defaults(func=run)


def type_mix_text(mix: tuple[tuple[str, float], ...]) -> str:
    """"62% Q4_K, 30% Q6_K, 8% F32"; shares under 0.5% are folded into "<1% ..."."""
    shown = [f"{share * 100:.0f}% {name}" for name, share in mix if share >= 0.005]
    small = [name for name, share in mix if share < 0.005]
    if small:
        shown.append(f"<1% {'/'.join(small)}")
    return ", ".join(shown)


def _summary(info) -> dict:
    return {
        "source": info.source,
        "name": info.name,
        "architecture": info.architecture,
        "gguf_version": info.version,
        "file_type": info.file_type,
        "file_bytes": info.file_size,
        "weights_bytes": info.weights_bytes,
        "n_params": info.n_params,
        "bits_per_weight": round(info.bits_per_weight, 3),
        "type_mix": {name: round(share, 4) for name, share in info.type_mix},
        "n_layer": info.n_layer,
        "n_embd": info.n_embd,
        "n_head": info.n_head,
        "n_head_kv": info.n_head_kv,
        "n_head_kv_per_layer": list(info.n_head_kv_per_layer),
        "head_dim_k": info.head_dim_k,
        "head_dim_v": info.head_dim_v,
        "n_vocab": info.n_vocab,
        "n_ctx_train": info.n_ctx_train,
        "has_chat_template": info.has_chat_template,
        "n_tensors": len(info.tensors),
        "header_bytes": info.header_bytes,
        **_architecture_json(info),
    }


def _architecture_json(info) -> dict:

    experts, window = expert_counts(info), sliding_window(info)
    return {
        "experts": None if experts is None else {"total": experts.total, "used": experts.used, "shared": experts.shared,
                                                 "expert_bytes": experts.expert_bytes,
                                                 "active_bytes_per_token": experts.active_bytes_per_token},
        "sliding_window": None if window is None else {"n_swa": window.n_swa, "swa_layers": window.n_swa_layers,
                                                       "source": window.source},
        "recurrent": None if (state := recurrent_state(info)) is None else {
            "kind": state.kind, "attention_layers": list(state.attention_layers),
            "recurrent_layers": list(state.recurrent_layers), "state_bytes_per_sequence": state.bytes_per_sequence,
            "dtype": RS_TYPE, "source": state.source},
        **attention_json(info),
    }


def _architecture_lines(info) -> list[tuple[str, str]]:
    """Experts (MoE) and sliding-window attention, when the model has them."""

    lines = []
    experts = expert_counts(info)
    if experts is not None:
        shared = f", {experts.shared} shared" if experts.shared else ", no shared expert"
        lines.append(("experts", f"{experts.total} per layer, {experts.used} used per token{shared} "
                                 f"({experts.expert_bytes / MIB:,.1f} MiB of experts; a token reads "
                                 f"{experts.active_bytes_per_token / MIB:,.1f} MiB of weights)"))
    window = sliding_window(info)
    if window is not None:
        lines.append(("sliding window", f"{window.n_swa:,} tokens on {window.n_swa_layers} of {info.n_layer} layers "
                                        f"({window.source})"))
    state = recurrent_state(info)
    if state is not None:
        lines.append(("recurrent state", f"{size(state.bytes_per_sequence)} per sequence, {RS_TYPE}, "
                                         f"any context ({state.source})"))
        lines.append(("layer map", layer_map_text(state)))
    return lines + attention_lines(info)


def _params_text(n_params: int) -> str:
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n_params >= scale:
            return f"{n_params / scale:.1f}{unit}"
    return str(n_params)


def run(args: argparse.Namespace) -> int:

    info = read_gguf(resolve_model(args.model))
    if args.json:
        data = _summary(info)
        if args.tensors:
            data["tensors"] = [{"name": t.name, "type": t.ggml_type, "shape": list(t.shape), "offset": t.offset,
                                "bytes": t.n_bytes} for t in info.tensors]
        write_json(data)
        return 0
    heads = f"{info.n_head} query / {info.n_head_kv} KV heads"
    if info.n_head_kv_per_layer:
        heads += f" (per layer: {min(info.n_head_kv_per_layer)}-{max(info.n_head_kv_per_layer)})"
    lines = [
        ("model", info.name),
        ("file", f"{info.source} ({info.file_size / MIB:,.1f} MiB, GGUF v{info.version})"),  # MiB: `models` shows decimal MB
        ("architecture", info.architecture or "not stated"),
        ("parameters", f"{_params_text(info.n_params)} ({info.n_params:,})"),
        ("file type", info.file_type or "not stated"),
        ("weights", f"{info.weights_bytes / MIB:,.1f} MiB, {info.bits_per_weight:.2f} bits per weight"),
        ("type mix", type_mix_text(info.type_mix) or "no tensors"),
        ("layers", str(info.n_layer)),
        ("embedding", str(info.n_embd)),
        ("attention", attention_text(info, heads)),
        ("vocabulary", f"{info.n_vocab:,} tokens"),
        ("trained context", f"{info.n_ctx_train:,} tokens" if info.n_ctx_train else "not stated"),
        ("chat template", "yes" if info.has_chat_template else "no (at load: the family's built-in template, else completion mode)"),
        *_architecture_lines(info),
        ("tensors", f"{len(info.tensors)} (header read: {info.header_bytes / 1024:,.0f} KiB)"),
    ]
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        sys.stdout.write(f"{label.ljust(width)}  {value}\n")
    if args.tensors:
        rows = [(t.name, t.ggml_type, "x".join(map(str, t.shape)), f"{t.n_bytes:,}") for t in info.tensors]
        sys.stdout.write("\n" + format_table(("TENSOR", "TYPE", "SHAPE", "BYTES"), rows, right=(3,)))
    return 0
