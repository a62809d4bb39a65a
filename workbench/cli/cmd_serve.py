"""`workbench serve`: the app in a browser for demos, through textual-serve."""

from __future__ import annotations

import argparse
import errno
import shlex
import socket
import sys

from workbench.cli.web_app import startup_failure
from workbench.core.config.loopback import is_loopback_host
from workbench.core.config.web_boundary import allowed_origins
from workbench.core.errors import WorkbenchError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve the app to a web browser (for demos and projectors)",
        description="Run the workbench app in the browser: every visitor gets their own app.",
    )
    parser.add_argument("--host", default="localhost", help="address to listen on (default: localhost)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument("--max-sessions", type=int, default=2, metavar="N",
                        help="browser sessions at once; each runs its own app and engine (default: 2)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow --host to be a non-loopback address (anyone who reaches it drives the app)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                        help="another page origin allowed to connect, e.g. the https URL of a reverse proxy")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="another name browsers reach this server by (the Host header); other names get 421")
    demo = parser.add_argument_group("what every session's app preselects (as `workbench` takes them)")
    for flag, dest, what in APP_OPTIONS:
        demo.add_argument(flag, dest=dest, metavar=dest.removeprefix("app_").upper(), help=what)
    parser.add_argument("app_args", nargs=argparse.REMAINDER,
                        help="after --: more arguments for the app, e.g. -- --model PATH --theme NAME")
    parser.set_defaults(func=run)


APP_OPTIONS = (
    ("--model", "app_model", "model to preselect: a GGUF path or 'bundled'"),
    ("--preset", "app_preset", "preset name or TOML path to preselect"),
    ("--device", "app_device", "device profile name or TOML path (default: host)"),
    ("--theme", "app_theme", "theme name"),
    ("--rpc", "app_rpc", "llama.cpp RPC nodes to split the model over (HOST:PORT[@PROFILE],...)"),
)


def app_argv(args: argparse.Namespace) -> list[str]:
    """The app's arguments: serve's own preselections, then what follows `--` (argparse keeps that `--`)."""
    argv = []
    for flag, dest, _ in APP_OPTIONS:
        value = getattr(args, dest, None)
        if value is not None:
            argv += [flag, value]
    rest = list(args.app_args or ())
    return argv + (rest[1:] if rest[:1] == ["--"] else rest)


def app_command(app_args: list[str]) -> str:
    """The shell command textual-serve starts for each browser session: the app, or the reason it cannot start."""
    return shlex.join([sys.executable, "-m", "workbench.cli.web_app", *app_args])


def check_port_free(host: str, port: int) -> None:
    """Refuse a bad or busy port up front: textual-serve would print its banner, then a traceback."""
    if not 1 <= port <= 65535:
        raise WorkbenchError(f"--port {port} is not a TCP port", fix="Give a port from 1 to 65535, e.g. --port 8000")
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as error:
        reason = "already in use" if error.errno == errno.EADDRINUSE else (error.strerror or str(error))
        raise WorkbenchError(f"cannot listen on {host}:{port}: {reason}",
                             fix=f"Stop what uses it or pick another port, e.g. --port {port + 1 if port < 65535 else 8000}") from error


def check_host(host: str, allow_remote: bool) -> str | None:
    """Refuse a non-loopback address unless asked for; the warning to print when allowed."""

    if is_loopback_host(host):
        return None
    if not allow_remote:
        raise WorkbenchError(f"--host {host} is not a loopback address: anyone who can reach it could drive the app "
                             "(download models, write presets, run the engine)",
                             fix="Serve on localhost, or add --allow-remote if you mean it")
    return (f"WARNING: serving on {host}, reachable from other machines. There is no login: anyone who reaches "
            f"this address can drive the workbench. Use it on a trusted network only.")


def run(args: argparse.Namespace) -> int:
    from workbench.cli.serve_guard import (  # deferred: importing textual-serve costs start-up time
        GuardedServer,
    )

    if args.max_sessions < 1:
        raise WorkbenchError(f"--max-sessions {args.max_sessions} allows no session", fix="Give 1 or more, e.g. --max-sessions 2")
    warning = check_host(args.host, args.allow_remote)
    check_port_free(args.host, args.port)
    argv = app_argv(args)
    _, failure = startup_failure(argv)  # the same check each session makes: a typo is refused here, in one line
    if failure:
        raise WorkbenchError(f"the app would not start with {shlex.join(argv) or 'no arguments'}: "
                             f"{failure.removeprefix('workbench: ')}")
    if warning:
        print(warning, file=sys.stderr)
    print(f"Serving the workbench at http://{args.host}:{args.port} to at most {args.max_sessions} browser "
          f"session(s) (Ctrl-C stops)", file=sys.stderr)
    GuardedServer(app_command(argv), host=args.host, port=args.port, title="Edge LLM Workbench",
                  max_sessions=args.max_sessions, allow_hosts=tuple(args.allow_host),
                  origins=allowed_origins(args.host, args.port, tuple(args.allow_origin), tuple(args.allow_host))).serve()
    return 0
