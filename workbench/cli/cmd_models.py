"""`workbench models`: the bundled model, GGUF models in the Hugging Face cache, and local folders."""

from __future__ import annotations

import argparse
import sys

from workbench.cli import models_disk, text_table
from workbench.cli.json_output import write_json
from workbench.cli.text_table import fitted_table
from workbench.core.errors import WorkbenchError
from workbench.core.gguf.reader import read_gguf
from workbench.core.hub.cache import list_models, partial_downloads
from workbench.core.hub.cache_layout import hub_cache_dir
from workbench.core.units import size_text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list models on this machine: bundled, in the HF cache, in local folders",
        description="List usable GGUF models: the bundled demo model, complete downloads in the Hugging "
        "Face cache (HF_HUB_CACHE / HF_HOME), and .gguf files under each --dir. Partial downloads are "
        "listed apart: they are not usable until `workbench download` finishes them.",
    )
    parser.add_argument("--dir", action="append", default=[], metavar="PATH", help="also list .gguf files under this folder (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    models_disk.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.delete:
        return models_disk.run_delete(args)
    if args.disk:
        return models_disk.run_disk(args)
    listed = list_models(tuple(args.dir))
    problems = {m.path: _problem(m.path) for m in listed}
    models = [m for m in listed if not problems[m.path]]
    broken = [m for m in listed if problems[m.path]]
    partials = partial_downloads()
    if args.json:
        write_json({
            "models": [{"kind": m.kind, "name": m.name, "path": str(m.path), "size_bytes": m.size_bytes, "repo": m.repo,
                        "revision": m.revision, "quant": m.quant, "parts": m.parts} for m in models],
            "unusable": [{"kind": m.kind, "name": m.name, "path": str(m.path), "size_bytes": m.size_bytes,
                          "repo": m.repo, "problem": problems[m.path]} for m in broken],
            "partial_downloads": [{"repo": p.repo, "blob": p.blob, "path": str(p.path), "size_bytes": p.size_bytes} for p in partials],
            "hub_cache": str(hub_cache_dir()),
        })
        return 0
    if models:
        rows = [(m.kind, m.repo or "-", m.name, m.quant or "?", size_text(m.size_bytes), str(m.path)) for m in models]
        sys.stdout.write(fitted_table(("KIND", "REPOSITORY", "FILE", "QUANT", "SIZE", "PATH"), rows, text_table.terminal_width(),
                                      right=(4,), details={5: ""}))
    else:
        sys.stdout.write("No models found (no bundled model, nothing in the HF cache).\n")
    if broken:
        sys.stdout.write("\nNot usable (the header check failed; fetch or copy these again):\n")
        for m in broken:
            sys.stdout.write(f"  {m.path}: {problems[m.path]}\n")
    if partials:
        sys.stdout.write("\nPartial downloads (not usable yet; `workbench download` resumes them):\n")
        for p in partials:
            sys.stdout.write(f"  {p.repo}  {size_text(p.size_bytes)} so far  {p.path}\n")
    sys.stdout.write(f"\nHF cache: {hub_cache_dir()}\n")
    return 0


def _problem(path) -> str:
    """Why a .gguf file cannot be loaded (an HTML page, empty, truncated), or "" when its header reads.

    Only the header and tensor table are read (tens of ms), which is where a failed
    download shows: the tensor data would end past the end of the file.
    """

    try:
        read_gguf(path)
    except WorkbenchError as error:
        return error.what
    except OSError as error:
        return f"cannot read it ({error.strerror or error})"
    return ""
