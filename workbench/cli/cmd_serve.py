"""`workbench serve`: the app in a browser for demos, through textual-serve."""

from __future__ import annotations

import argparse
import errno
import shlex
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve the app to a web browser (for demos and projectors)",
        description="Run the workbench app in the browser: every visitor gets their own app.",
    )
    parser.add_argument("--host", default="localhost", help="address to listen on (default: localhost)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument("app_args", nargs=argparse.REMAINDER, help="arguments for the app, e.g. --model PATH")
    parser.set_defaults(func=run)


def app_command(app_args: list[str]) -> str:
    """The shell command textual-serve starts for each browser session."""
    return shlex.join([sys.executable, "-m", "workbench", *app_args])


def check_port_free(host: str, port: int) -> None:
    """Refuse a bad or busy port up front: textual-serve would print its banner, then a traceback."""
    import socket

    from workbench.core.errors import WorkbenchError

    if not 1 <= port <= 65535:
        raise WorkbenchError(f"--port {port} is not a TCP port", fix="Give a port from 1 to 65535, e.g. --port 8000")
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as error:
        reason = "already in use" if error.errno == errno.EADDRINUSE else (error.strerror or str(error))
        raise WorkbenchError(f"cannot listen on {host}:{port}: {reason}",
                             fix=f"Stop what uses it or pick another port, e.g. --port {port + 1 if port < 65535 else 8000}") from error


def run(args: argparse.Namespace) -> int:
    from textual_serve.server import Server

    check_port_free(args.host, args.port)
    print(f"Serving the workbench at http://{args.host}:{args.port} (Ctrl-C stops)", file=sys.stderr)
    Server(app_command(args.app_args), host=args.host, port=args.port, title="Edge LLM Workbench").serve()
    return 0
