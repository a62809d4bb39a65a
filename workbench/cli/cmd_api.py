"""`workbench api MODEL --preset P`: serve the model over an OpenAI-compatible HTTP API, N requests decoded together."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from workbench.cli import text_table
from workbench.cli.cmd_ledger import ledger_text, mb_text
from workbench.cli.text_table import wrap_text
from workbench.core.config.devices import load_device
from workbench.core.config.loopback import is_loopback_host
from workbench.core.config.presets import load_preset
from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import resolve_model
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.core.serve.engine_host import ServingEngine
from workbench.core.serve.listen import listen
from workbench.core.telemetry.sampler import Sampler
from workbench.core.units import MIB

MAX_SLOTS = 64
MAX_QUEUE = 10_000


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "api",
        help="serve a model over an OpenAI-compatible HTTP API (continuous batching, queue, /metrics)",
        description="Load MODEL with PRESET in the engine process and serve POST /v1/chat/completions, "
        "POST /v1/completions, GET /v1/models, GET /health and GET /metrics (Prometheus). Up to --parallel "
        "requests decode together in one llama.cpp batch, each in its own sequence (slot) with ctx_size / "
        "parallel tokens of context; --queue more wait; beyond that clients get 429 with Retry-After.",
    )
    parser.add_argument("model", metavar="MODEL", help="a .gguf path or 'bundled'")
    parser.add_argument("--preset", default="as-is", help="preset name or TOML path (default: as-is)")
    parser.add_argument("--device", help="device profile for the memory check (default: this machine)")
    parser.add_argument("--allow-overbudget", action="store_true", help="load even when the ledger says it does not fit")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a --host that is not a loopback address (the API is then reachable from the network)")
    parser.add_argument("--port", type=int, default=8080, help="TCP port (default: 8080; 0 = any free port)")
    parser.add_argument("--parallel", type=int, default=4, metavar="N", help="slots: requests decoded together (default: 4)")
    parser.add_argument("--queue", type=int, default=16, metavar="M", help="requests that may wait for a slot (default: 16)")
    parser.add_argument("--api-key", default=None, metavar="KEY",
                        help="require 'Authorization: Bearer KEY' on every request (default: $WORKBENCH_API_KEY, else none)")
    parser.add_argument("--model-name", default=None, help="the model id clients see (default: the file name without .gguf)")
    parser.add_argument("--no-telemetry", action="store_true", help="leave temperatures, power and memory out of /metrics")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if not 1 <= args.parallel <= MAX_SLOTS:
        raise WorkbenchError(f"--parallel {args.parallel} is out of range", fix=f"Give 1 to {MAX_SLOTS} slots")
    if not 0 <= args.queue <= MAX_QUEUE:
        raise WorkbenchError(f"--queue {args.queue} is out of range", fix=f"Give 0 to {MAX_QUEUE} waiting requests")
    if not 0 <= args.port <= 65535:
        raise WorkbenchError(f"--port {args.port} is not a TCP port", fix="Give 1 to 65535, or 0 for any free port")
    if not is_loopback_host(args.host) and not args.allow_remote:
        raise WorkbenchError(f"--host {args.host} would open the API to the network",
                             fix="Add --allow-remote to mean it (and --api-key to require a key), or keep the default 127.0.0.1")
    api_key = args.api_key if args.api_key is not None else os.environ.get("WORKBENCH_API_KEY") or None
    if api_key is not None and (not api_key.isprintable() or " " in api_key or not api_key):
        raise WorkbenchError("--api-key must be printable characters without spaces")
    model_path = resolve_model(args.model)
    preset = load_preset(args.preset)
    device = load_device(args.device) if args.device else load_device("host")
    if preset.ctx_size and preset.ctx_size // args.parallel < 16:
        raise WorkbenchError(f"ctx_size {preset.ctx_size} split over {args.parallel} slots leaves "
                             f"{preset.ctx_size // args.parallel} tokens per request",
                             fix="Use fewer --parallel slots or a preset with a larger ctx_size")
    listener = listen(args.host, args.port)  # before loading: a taken port costs no load time
    _print_plan(model_path, preset, device, args.parallel, args.queue)
    return _serve(args, listener, model_path, preset, device, api_key)


def _serve(args: argparse.Namespace, listener: socket.socket, model_path, preset, device, api_key: str | None) -> int:
    import uvicorn  # deferred: importing the ASGI stack costs start-up time

    from workbench.core.serve.app import (  # deferred: importing the ASGI stack costs start-up time
        ServerConfig,
        create_app,
    )

    host = ServingEngine(model_path, preset, args.parallel, device=device, allow_overbudget=args.allow_overbudget)
    sampler = None
    try:
        print("loading the model and opening the slots ...", file=sys.stderr, flush=True)
        host.start()  # EngineError (one line) when the model cannot load or the slots cannot open
        _print_opened(host)
        if not args.no_telemetry:
            sampler = Sampler(engine_pid=host.pid)
        name = args.model_name or model_path.name.removesuffix(".gguf")
        app = create_app(host, ServerConfig(name, api_key, args.queue), telemetry=sampler)
        bound_host, bound_port = listener.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        print(f"serving {name} on http://{shown}:{bound_port}/v1 ({args.parallel} slots, queue {args.queue}"
              f"{', API key required' if api_key else ''}); Ctrl-C stops", flush=True)
        if not is_loopback_host(args.host) and api_key is None:
            print("warning: the API is reachable from the network without a key (--api-key)", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
        uvicorn.Server(config).run(sockets=[listener])
        return 0
    finally:
        if sampler is not None:
            sampler.close()
        host.close()
        listener.close()


def _print_plan(model_path, preset, device, n_slots: int, queue: int) -> None:
    """The ledger for this preset on this device, and what N slots make of its context."""
    info = read_gguf(model_path)
    ledger = predict_ledger(info, preset, device)
    width = text_table.terminal_width()
    sys.stdout.write(ledger_text(ledger, preset.weights, device.mem_bandwidth_gbs, info.n_ctx_train, width))
    slot_ctx = ledger.ctx_size // n_slots
    sys.stdout.write("\n" + wrap_text(
        f"slots: {n_slots} x {slot_ctx:,} tokens of context (ctx {ledger.ctx_size:,} / {n_slots}, as llama-server -c "
        f"{ledger.ctx_size} -np {n_slots}); the slots share one KV cache of {mb_text(ledger.kv_bytes)} MB (kv_unified), "
        f"{mb_text(ledger.kv_bytes // n_slots)} MB per full slot; up to {queue} more requests wait", width) + "\n")
    sys.stdout.write(wrap_text(f"a request's prompt + max_tokens must fit {slot_ctx:,} tokens (else 400)", width) + "\n")
    sys.stdout.flush()


def _print_opened(host) -> None:
    opened, loaded = host.opened, host.loaded
    measured = []
    if loaded is not None:
        measured.append(f"weights {loaded.model_buffer_bytes / MIB:,.0f} MiB")
    if opened.context_recreated and opened.kv_buffer_bytes:
        measured.append(f"KV {opened.kv_buffer_bytes / MIB:,.1f} MiB, compute {opened.compute_buffer_bytes / MIB:,.1f} MiB "
                        f"(context re-made with n_seq_max {opened.n_seq_max})")
    elif loaded is not None:
        measured.append(f"KV {loaded.kv_buffer_bytes / MIB:,.1f} MiB, compute {loaded.compute_buffer_bytes / MIB:,.1f} MiB")
    print(f"llama.cpp: context {opened.n_ctx:,} cells shared by {opened.n_slots} sequences "
          f"({opened.slot_ctx:,} per slot, kv_unified={'yes' if opened.kv_unified else 'no'}); " + ", ".join(measured),
          flush=True)
