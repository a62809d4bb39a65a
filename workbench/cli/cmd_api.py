"""`workbench api MODEL --preset P`: serve the model over an OpenAI-compatible HTTP API, N requests decoded together."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import socket
import sys

from workbench.cli import text_table
from workbench.cli.cmd_ledger import ledger_text, mb_text
from workbench.cli.text_table import wrap_text
from workbench.core.config.devices import load_device
from workbench.core.config.loopback import is_loopback_host
from workbench.core.config.presets import load_preset
from workbench.core.config.web_boundary import WebBoundary
from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import resolve_model
from workbench.core.files.regular import read_regular_file
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.core.serve.engine_host import ServingEngine
from workbench.core.serve.listen import listen
from workbench.core.telemetry.sampler import Sampler
from workbench.core.units import MIB

MAX_SLOTS = 64
MAX_QUEUE = 10_000
_ORIGIN = re.compile(r"^https?://[^/\s?#@]+$", re.IGNORECASE)  # scheme://host[:port], as browsers send Origin
MAX_KEY_FILE_BYTES = 4096  # a key is a line; a larger file is not a key file


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
                        help="require 'Authorization: Bearer KEY' on every request; the key then shows in the process "
                        "list (ps) to every user of the machine: prefer --api-key-file or $WORKBENCH_API_KEY")
    parser.add_argument("--api-key-file", default=None, metavar="FILE",
                        help="read the key from FILE (its first line); default: $WORKBENCH_API_KEY, else no key")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="another name clients reach this server by (the Host header), e.g. a reverse proxy's; "
                        "requests naming any other host are refused (421), as DNS rebinding sends")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                        help="a web page origin allowed to call the API from a browser (CORS), e.g. http://localhost:3000; "
                        "requests from other pages are refused (403)")
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
                             fix="Add --allow-remote to mean it (and --api-key-file to require a key), or keep the default 127.0.0.1")
    for origin in args.allow_origin:
        if not _ORIGIN.match(origin.strip().rstrip("/")):
            raise WorkbenchError(f"--allow-origin {origin[:100]!r} is not a page origin",
                                 fix="Give scheme, host and port only, e.g. --allow-origin http://localhost:3000")
    for name in args.allow_host:
        if not name.strip() or any(char in name for char in " /@?#"):
            raise WorkbenchError(f"--allow-host {name[:100]!r} is not a host name", fix="Give a name, e.g. --allow-host box.lan")
    api_key = api_key_from(args)
    model_path = resolve_model(args.model)
    preset = dataclasses.replace(load_preset(args.preset), parallel=args.parallel)  # the ledger and the load for N
    device = load_device(args.device) if args.device else load_device("host")
    if preset.ctx_size and preset.ctx_size // args.parallel < 16:
        raise WorkbenchError(f"ctx_size {preset.ctx_size} split over {args.parallel} slots leaves "
                             f"{preset.ctx_size // args.parallel} tokens per request",
                             fix="Use fewer --parallel slots or a preset with a larger ctx_size")
    listener = listen(args.host, args.port)  # before loading: a taken port costs no load time
    _print_plan(model_path, preset, device, args.parallel, args.queue)
    return _serve(args, listener, model_path, preset, device, api_key)


def api_key_from(args: argparse.Namespace) -> str | None:
    """The key from --api-key-file, --api-key or $WORKBENCH_API_KEY (in that order), checked; None for no key."""
    if args.api_key_file is not None and args.api_key is not None:
        raise WorkbenchError("--api-key and --api-key-file both give a key", fix="Give one (--api-key-file keeps it out of ps)")
    if args.api_key_file is not None:
        fix = "Give a text file whose first line is the key"
        try:
            raw = read_regular_file(args.api_key_file, max_bytes=MAX_KEY_FILE_BYTES, what="an API key file", fix=fix)
        except OSError as error:
            raise WorkbenchError(f"cannot read the API key file ({error.strerror})", where=args.api_key_file, fix=fix) from None
        try:
            lines = raw.decode("utf-8").strip().splitlines()
        except UnicodeDecodeError:
            raise WorkbenchError("the API key file is not UTF-8 text", where=args.api_key_file, fix=fix) from None
        key, where = (lines[0].strip() if lines else ""), "--api-key-file"
        if os.stat(args.api_key_file).st_mode & 0o077:
            print(f"warning: {args.api_key_file} is readable by other users; chmod 600 it", file=sys.stderr, flush=True)
    elif args.api_key is not None:
        key, where = args.api_key, "--api-key"
        print("warning: --api-key shows the key in the process list (ps) to every user of this machine; "
              "use --api-key-file or $WORKBENCH_API_KEY", file=sys.stderr, flush=True)
    else:
        key, where = os.environ.get("WORKBENCH_API_KEY") or "", "$WORKBENCH_API_KEY"
        if not key:
            return None
    if not key or not key.isprintable() or " " in key or len(key) > MAX_KEY_FILE_BYTES:
        raise WorkbenchError(f"the key from {where} must be printable characters without spaces",
                             fix="Use a key like the output of `openssl rand -hex 24`")
    return key


def _serve(args: argparse.Namespace, listener: socket.socket, model_path, preset, device, api_key: str | None) -> int:
    from workbench.core.serve.app import (  # deferred: importing the ASGI stack costs start-up time
        ServerConfig,
        create_app,
    )
    from workbench.core.serve.http_limits import (  # deferred: importing the ASGI stack costs start-up time
        StoppingServer,
        max_connections,
        server_config,
    )

    host = ServingEngine(model_path, preset, args.parallel, device=device, allow_overbudget=args.allow_overbudget,
                         on_restart=lambda line: print(f"workbench api: {line}", file=sys.stderr, flush=True))
    sampler = None
    try:
        print("loading the model and opening the slots ...", file=sys.stderr, flush=True)
        host.start()  # EngineError (one line) when the model cannot load or the slots cannot open
        _print_opened(host)
        if not args.no_telemetry:
            sampler = Sampler(engine_pid=host.pid)
        name = args.model_name or model_path.name.removesuffix(".gguf")
        boundary = WebBoundary.serving(args.host, extra_names=tuple(args.allow_host), origins=tuple(args.allow_origin))
        app = create_app(host, ServerConfig(name, api_key, args.queue, boundary), telemetry=sampler)
        bound_host, bound_port = listener.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        print(f"serving {name} on http://{shown}:{bound_port}/v1 ({args.parallel} slots, queue {args.queue}"
              f"{', API key required' if api_key else ''}); Ctrl-C stops", flush=True)
        if not is_loopback_host(args.host) and api_key is None:
            print("warning: the API is reachable from the network without a key (--api-key-file)", file=sys.stderr, flush=True)
        config = server_config(app, connection_limit=max_connections(args.parallel, args.queue))
        StoppingServer(config, host).run(sockets=[listener])
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
        f"{ledger.ctx_size} -np {n_slots}); the slots share one KV cache of {mb_text(ledger.kv_bytes)} MiB (kv_unified), "
        f"{mb_text(ledger.kv_bytes // n_slots)} MiB per full slot; up to {queue} more requests wait", width) + "\n")
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
    if loaded is not None and loaded.prediction_check and not opened.context_recreated:
        print(loaded.prediction_check, flush=True)
