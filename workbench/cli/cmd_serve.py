"""`workbench serve`: the app in a browser for demos, through textual-serve."""

from __future__ import annotations

import argparse
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


def run(args: argparse.Namespace) -> int:
    from textual_serve.server import Server

    print(f"Serving the workbench at http://{args.host}:{args.port} (Ctrl-C stops)", file=sys.stderr)
    Server(app_command(args.app_args), host=args.host, port=args.port, title="Edge LLM Workbench").serve()
    return 0
