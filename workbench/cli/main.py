"""`workbench`: opens the app with no command; otherwise runs one headless command."""

from __future__ import annotations

import argparse
import importlib
import sys

from workbench.core.errors import WorkbenchError
from workbench.ui.run import run_app

# Each command lives in workbench/cli/cmd_<name>.py with `add_parser(subparsers)` that
# registers it and sets `func=run` on its parser. Listed here so `--help` shows them in order.
COMMANDS = (
    "inspect",
    "ledger",
    "fit",
    "presets",
    "devices",
    "chat",
    "conversations",
    "quantize",
    "models",
    "search",
    "files",
    "download",
    "monitor",
    "bench",
    "report",
    "serve",
    "node",
    "api",
    "doctor",
)


class OneLineErrorParser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr (what, where, what to do), like every other error.

    argparse's own error() prints the whole usage block first; in an 80-column terminal
    that pushes the actual complaint below several lines of options. Sub-parsers inherit
    this class.
    """

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message}. See `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="workbench",
        description="Edge LLM Workbench. With no command, opens the app.",
    )
    parser.add_argument("--model", help="model to preselect in the app: a GGUF path or 'bundled'")
    parser.add_argument("--preset", help="preset name or TOML path to preselect in the app")
    parser.add_argument("--device", help="device profile name or TOML path (default: host)")
    parser.add_argument("--theme", help="theme name for the app")
    parser.add_argument("--rpc", metavar="HOST:PORT[@PROFILE],...", default="",
                        help="llama.cpp RPC nodes to split the model over in the app (see `workbench node`)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"workbench.cli.cmd_{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # argparse would blame `workbench`, not the command the extras were given to
        prog = f"{parser.prog} {args.command}" if args.command else parser.prog
        parser.exit(2, f"{prog}: unrecognized arguments: {' '.join(extras)}. See `{prog} --help`\n")
    try:
        if args.command is None:
            return run_app(args)
        return int(args.func(args) or 0)
    except WorkbenchError as error:
        print(f"workbench: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
