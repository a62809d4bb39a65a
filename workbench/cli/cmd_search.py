"""`workbench search TEXT`: GGUF repositories on the hub, most downloaded first; `--curated`: the edge short list."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from workbench.cli import text_table
from workbench.cli.json_output import write_json
from workbench.cli.text_table import fitted_table, format_table
from workbench.core.errors import WorkbenchError
from workbench.core.hub import search
from workbench.core.hub.search import curated_models


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search the Hugging Face hub for GGUF models (or list the curated edge models)",
        description="Search GGUF repositories on the hub (HF_ENDPOINT, default huggingface.co) by name, "
        "most downloaded first. --curated lists the shipped short list of edge-friendly models instead.",
    )
    parser.add_argument("text", nargs="*", default=[], help="words in the repository name, e.g. qwen2.5 0.5b "
                        "(with --curated: only curated models whose name or repository has every word)")
    parser.add_argument("--limit", type=int, default=20, help="at most this many results (default 20)")
    parser.add_argument("--curated", action="store_true", help="list the curated edge-friendly models (no network)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    text = " ".join(args.text).strip()  # unquoted words arrive one per argument
    if args.curated:
        words = text.lower().split()
        models = [m for m in curated_models() if all(w in f"{m.name} {m.repo}".lower() for w in words)]
        if args.json:
            write_json([asdict(m) for m in models])
            return 0
        rows = [(m.name, m.params, m.repo, m.suggested_file, "yes" if m.gated else "", m.note) for m in models]
        sys.stdout.write(fitted_table(("MODEL", "PARAMS", "REPOSITORY", "START WITH", "GATED", "NOTE"), rows, text_table.terminal_width(),
                                      details={3: "start with ", 5: ""}))
        sys.stdout.write("\nSee a repository's files and whether they fit: workbench files REPO --preview\n")
        return 0
    if not text:
        raise WorkbenchError("search needs TEXT", fix="Give words of the model name, e.g. `workbench search qwen2.5`, or use --curated")

    hits = search.search_gguf_repos(text, limit=args.limit)
    if args.json:
        write_json([asdict(h) for h in hits])
        return 0
    if not hits:
        sys.stdout.write(f"No GGUF repositories match {text!r}.\n")
        return 0
    rows = [(h.repo, _count(h.downloads), _count(h.likes), "yes" if h.gated else "", h.last_modified) for h in hits]
    sys.stdout.write(format_table(("REPOSITORY", "DOWNLOADS", "LIKES", "GATED", "UPDATED"), rows, right=(1, 2)))
    return 0


def _count(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"
