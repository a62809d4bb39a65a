"""`workbench conversations`: the kept conversations (the app's and `workbench chat`'s journals): list, show,
rename, delete, export as Markdown or JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli import text_table
from workbench.cli.json_output import write_json
from workbench.cli.text_table import fitted_table
from workbench.core.errors import WorkbenchError
from workbench.core.files.chat_journal import journal_folder
from workbench.core.files.conversations import (
    FORMATS,
    conversation_markdown,
    delete_conversation,
    export_conversation,
    list_conversations,
    load_titles,
    open_conversation,
    rename_conversation,
)

NAME_HELP = "a conversation's name (see `workbench conversations`), or 'latest'"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "conversations",
        help="the kept conversations: list, show, rename, delete, export",
        description="Conversations are journaled turn by turn in the state folder by the app and by "
        "`workbench chat` (the newest 20 are kept). List them with their titles; show, rename, delete "
        "or export one as Markdown or JSON. `workbench chat MODEL --resume NAME` continues one.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run, conversations_action="list")
    actions = parser.add_subparsers(dest="conversations_action", metavar="list|show|rename|delete|export")
    actions.add_parser("list", help="every kept conversation, newest first")
    show = actions.add_parser("show", help="print a conversation as Markdown")
    show.add_argument("name", help=NAME_HELP)
    rename = actions.add_parser("rename", help="give a conversation a title")
    rename.add_argument("name", help=NAME_HELP)
    rename.add_argument("title", help="the title (at most 120 characters)")
    delete = actions.add_parser("delete", help="delete a conversation's journal")
    delete.add_argument("name", help=NAME_HELP)
    delete.add_argument("--yes", action="store_true", help="really delete (without it, say what would go)")
    export = actions.add_parser("export", help="write a conversation as Markdown (.md) or JSON (.json)")
    export.add_argument("name", help=NAME_HELP)
    export.add_argument("--out", required=True, metavar="FILE", help="the file to write (.md or .json)")
    export.add_argument("--format", choices=FORMATS, default="", help="md or json (default: from the --out suffix)")


def run(args: argparse.Namespace) -> int:
    folder = journal_folder()
    action = args.conversations_action
    if action == "show":
        restored = open_conversation(folder, args.name)
        for problem in restored.problems:
            print(f"workbench: {restored.path}: {problem}", file=sys.stderr)
        sys.stdout.write(conversation_markdown(restored, load_titles(folder).get(restored.path.stem, "")))
        return 0
    if action == "rename":
        name = rename_conversation(folder, args.name, args.title)
        print(f"{name}: titled {args.title.strip()!r}")
        return 0
    if action == "delete":
        if not args.yes:
            restored = open_conversation(folder, args.name)
            raise WorkbenchError(f"would delete {restored.path.stem} ({len(restored.turns)} "
                                 f"{'turn' if len(restored.turns) == 1 else 'turns'})",
                                 fix="Pass --yes to delete it")
        print(f"deleted {delete_conversation(folder, args.name)}")
        return 0
    if action == "export":
        print(export_conversation(folder, args.name, Path(args.out), args.format))
        return 0
    return _list(folder, args.json)


def _list(folder: Path, as_json: bool) -> int:
    summaries = list_conversations(folder)
    if as_json:
        write_json({"folder": str(folder), "conversations": [
            {"name": s.name, "title": s.title, "started": s.started, "model": s.model, "preset": s.preset,
             "turns": s.turns, "closed": s.closed, "problem": s.problem, "path": str(s.path)} for s in summaries]})
        return 0
    if not summaries:
        sys.stdout.write(f"No conversations kept yet ({folder}).\n")
        return 0
    rows = [(s.name, s.started or "-", str(s.turns), Path(s.model).name or "-", s.problem or s.title) for s in summaries]
    sys.stdout.write(fitted_table(("NAME", "STARTED", "TURNS", "MODEL", "TITLE"), rows, text_table.terminal_width(),
                                  right=(2,), details={4: ""}))
    return 0
