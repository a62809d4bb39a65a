"""`workbench node serve|probe`: a llama.cpp RPC node on this board, and a check of one from afar."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from workbench.cli.json_output import write_json
from workbench.core.config.rpc_endpoints import parse_endpoint
from workbench.core.errors import WorkbenchError
from workbench.core.rpc.keepalive import watch_client_connections
from workbench.core.rpc.library import require_rpc
from workbench.core.rpc.node_proxy import DEFAULT_IDLE_TIMEOUT_S, NodeProxy, open_listener
from workbench.core.rpc.node_server import SECURITY_WARNING, check_listen_host, default_threads
from workbench.core.rpc.node_supervisor import SupervisedServer, node_budget_bytes
from workbench.core.rpc.wire import probe_node
from workbench.core.units import MIB, threads_text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "node",
        help="serve this board's memory and compute to another one as a llama.cpp RPC node, or probe a node",
        description="Split a model over several boards with llama.cpp's RPC backend: run `node serve` on each "
        "board that lends its memory, `node probe` from the main board, then give the nodes with --rpc.",
    )
    commands = parser.add_subparsers(dest="node_command", metavar="ACTION", required=True)
    serve = commands.add_parser(
        "serve", help="run llama.cpp's RPC server here (blocks; Ctrl-C stops it)",
        description="Run llama.cpp's RPC server through the llama.cpp library llama-cpp-python built. It serves "
        "this board's accelerator, or its CPU when it has none, to one client at a time. RPC has no "
        "authentication: it listens on 127.0.0.1 unless --allow-remote opens another address.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="IPv4 address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=50052, help="port (default: 50052, as rpc-server; 0 = any free port)")
    serve.add_argument("--threads", type=int, default=0, metavar="N", help="CPU threads (default: all cores)")
    serve.add_argument("--cache", metavar="DIR", help="keep tensors the client sends in DIR, so a reload "
                       "of the same model sends only hashes (llama.cpp's rpc-server -c)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="allow --host to be a non-loopback address (anyone who reaches it can use the node)")
    serve.add_argument("--max-memory", type=int, metavar="MIB", help="most memory a client may allocate here, "
                       "in MiB (default: the memory available when the node starts); also bounds the server's "
                       "address space")
    serve.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S, metavar="S",
                       help=f"drop a client that holds no buffer and sends no command for S seconds "
                       f"(default: {DEFAULT_IDLE_TIMEOUT_S:g})")
    serve.set_defaults(func=run_serve)
    probe = commands.add_parser(
        "probe", help="is a node reachable; its memory, round-trip latency and link throughput",
        description="Speak llama.cpp's RPC protocol to HOST:PORT: HELLO, each device's free and total memory, "
        "the median round trip of a small command, and the throughput of a transfer to the node and back.",
    )
    probe.add_argument("endpoint", metavar="HOST:PORT")
    probe.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each answer (default: 5)")
    probe.add_argument("--bytes", type=int, default=4 * MIB, help="size of the transfer test (default: 4 MiB; 0 = skip)")
    probe.add_argument("--json", action="store_true", help="print JSON")
    probe.set_defaults(func=run_probe)


def run_serve(args: argparse.Namespace) -> int:

    host = check_listen_host(args.host, allow_remote=args.allow_remote)
    if args.threads < 0:
        raise WorkbenchError(f"--threads {args.threads} is negative", fix="Give a thread count, or 0 for all cores")
    if not 0 < args.idle_timeout <= 86400:
        raise WorkbenchError(f"--idle-timeout {args.idle_timeout:g} is out of range", fix="Give 1 to 86400 seconds")
    require_rpc()
    threads = args.threads or default_threads()
    cache = Path(args.cache).expanduser() if args.cache else None
    budget = node_budget_bytes(args.max_memory)
    listener = open_listener(host, args.port)
    say = lambda text: print(text, flush=True)  # noqa: E731 - the log is this process's stdout
    # llama.cpp's server runs in a child on a private port; this process fronts it (see rpc.node_proxy).
    server = SupervisedServer(threads, cache, budget, say)
    try:
        server.start()
        port = listener.getsockname()[1]
        say(f"listening on {host}:{port}")
        # An engine host that goes silent (cable pulled) must not keep this node busy for ever.
        watch_client_connections(port, say)
        say(f"serving {', '.join(server.devices)} with {threads_text(threads)}; one client at a time; clients may "
            f"allocate up to {budget / MIB:,.0f} MiB")
        if host != "127.0.0.1":
            print(SECURITY_WARNING.format(address=f"{host}:{port}"), file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SIGTERM ends the node as Ctrl-C does
        NodeProxy(listener, server.port, say, budget, args.idle_timeout).serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 0
    finally:
        server.stop()
        listener.close()


def probe_text(report) -> str:
    if not report.reachable:
        return f"{report.address}: unreachable: {report.reason}\n"
    lines = [f"{report.address}: reachable, llama.cpp RPC protocol v{report.protocol}\n"]
    for index, device in enumerate(report.devices):
        lines.append(f"  device {index}: {device.free_bytes / MIB:,.0f} MiB free of {device.total_bytes / MIB:,.0f} MiB "
                     "(as the node reports it)\n")
    if report.latency_s is not None:
        lines.append(f"  round trip: {report.latency_s * 1000:.2f} ms median "
                     f"(spread {report.latency_spread_s * 1000:.2f} ms)\n")
    if report.upload_bytes_per_s and report.download_bytes_per_s:
        lines.append(f"  throughput: {report.upload_bytes_per_s * 8 / 1e6:,.0f} Mbit/s to the node, "
                     f"{report.download_bytes_per_s * 8 / 1e6:,.0f} Mbit/s back "
                     f"({report.transfer_bytes / MIB:g} MiB each way)\n")
    if report.reason:
        lines.append(f"  {report.reason}\n")
    return "".join(lines)


def probe_json(report) -> dict:
    return {
        "endpoint": report.address,
        "reachable": report.reachable,
        "reason": report.reason,
        "protocol": report.protocol,
        "devices": [{"free_bytes": d.free_bytes, "total_bytes": d.total_bytes} for d in report.devices],
        "latency_s": report.latency_s,
        "latency_spread_s": report.latency_spread_s,
        "upload_bytes_per_s": report.upload_bytes_per_s,
        "download_bytes_per_s": report.download_bytes_per_s,
        "transfer_bytes": report.transfer_bytes,
    }


def run_probe(args: argparse.Namespace) -> int:

    endpoint = parse_endpoint(args.endpoint, "node probe", allow_profile=False)
    if not 0 < args.timeout <= 600:
        raise WorkbenchError(f"--timeout {args.timeout:g} is out of range", fix="Give seconds from 0 to 600, e.g. --timeout 5")
    if not 0 <= args.bytes <= 1 << 30:
        raise WorkbenchError(f"--bytes {args.bytes} is out of range", fix="Give 0 to 1073741824 bytes, e.g. --bytes 4194304")
    report = probe_node(endpoint, timeout_s=args.timeout, transfer_bytes=args.bytes)
    if args.json:
        write_json(probe_json(report))
    elif report.reachable:
        sys.stdout.write(probe_text(report))
    else:
        print(f"workbench: {probe_text(report).strip()}", file=sys.stderr)
    return 0 if report.reachable else 1
