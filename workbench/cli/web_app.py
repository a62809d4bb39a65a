"""What `workbench serve` runs for each browser session: the app with the served arguments, or, when it cannot
start, a one-screen app that shows why (python -m workbench.cli.web_app APP ARGS...).

Under textual-serve a process that exits before drawing leaves the visitor on the splash screen for ever,
its error only on the server's stdout; the page must show it instead."""

from __future__ import annotations

import contextlib
import io
import shlex
import sys

from workbench.cli.main import build_parser
from workbench.core.errors import WorkbenchError
from workbench.ui.collector import pace_collector
from workbench.ui.run import build_app

MAX_MESSAGE_CHARS = 4000  # what one screen shows of an error (a traceback's last line is enough)


def startup_failure(argv: list[str]) -> tuple[object | None, str]:
    """(the app ready to run, "") or (None, why it cannot start, in one sentence)."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = build_parser().parse_args(argv)
    except SystemExit:  # argparse said what is wrong on stderr
        return None, said.getvalue().strip() or f"bad arguments: {shlex.join(argv)}"
    if args.command is not None:
        return None, f"`{args.command}` is a command, not an app argument: serve runs the app"
    try:
        return build_app(args), ""
    except WorkbenchError as error:
        return None, f"workbench: {error}"
    except Exception as error:  # noqa: BLE001 - any failure to build the app is shown, not a blank page
        return None, f"{type(error).__name__}: {error}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    app, failure = startup_failure(argv)
    if app is not None:
        pace_collector()
        app.run()
        return int(app.return_code or 0)
    from workbench.ui.startup_error import StartupErrorApp  # deferred: textual, only when the app cannot start

    print(failure, file=sys.stderr)  # the server's console too
    StartupErrorApp(failure[:MAX_MESSAGE_CHARS], shlex.join(["workbench", *argv])).run()
    return 2


if __name__ == "__main__":
    sys.exit(main())
