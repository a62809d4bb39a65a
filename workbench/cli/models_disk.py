"""`workbench models --disk` and `--delete`: disk use per model, and deleting one (HF cache or the workbench's folder)."""

from __future__ import annotations

import argparse
import sys

from workbench.cli import text_table
from workbench.cli.json_output import write_json
from workbench.cli.text_table import fitted_table
from workbench.core.errors import WorkbenchError
from workbench.core.hub.disk_use import delete_cached_model, delete_local_model, disk_use
from workbench.core.units import size_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--disk", action="store_true",
                        help="disk use per model: HF cache repositories (every revision) and local .gguf files")
    parser.add_argument("--delete", metavar="REPO|PATH",
                        help="delete a repository from the HF cache (through huggingface_hub's cache API) or a "
                        ".gguf file the workbench made (its quantized folder); needs --yes")
    parser.add_argument("--revision", default="", help="with --delete REPO: only this cached commit (the others stay)")
    parser.add_argument("--yes", action="store_true", help="with --delete: really delete (without it, say what would go)")


def run_disk(args: argparse.Namespace) -> int:
    use = disk_use(tuple(args.dir))
    if args.json:
        write_json({
            "hub_cache": str(use.cache), "hub_cache_bytes": use.cache_bytes,
            "repos": [{"repo": r.repo, "path": str(r.path), "size_bytes": r.size_bytes, "blobs": r.blobs,
                       "revisions": list(r.revisions), "refs": list(r.refs), "gguf_files": list(r.gguf_files)}
                      for r in use.repos],
            "local": [{"path": str(f.path), "size_bytes": f.size_bytes, "deletable": f.deletable} for f in use.local],
            "problems": list(use.problems),
        })
        return 0
    width = text_table.terminal_width()
    if use.repos:
        rows = [(r.repo, size_text(r.size_bytes), str(len(r.revisions)), ", ".join(r.gguf_files) or "-") for r in use.repos]
        sys.stdout.write(fitted_table(("REPOSITORY", "ON DISK", "REVISIONS", "GGUF FILES"), rows, width, right=(1, 2),
                                      details={3: ""}))
    else:
        sys.stdout.write("No model repositories in the HF cache.\n")
    if use.local:
        sys.stdout.write("\n")
        rows = [(size_text(f.size_bytes), "yes" if f.deletable else "no", str(f.path)) for f in use.local]
        sys.stdout.write(fitted_table(("ON DISK", "DELETABLE", "LOCAL FILE"), rows, width, right=(0,), details={2: ""}))
    for problem in use.problems:
        sys.stdout.write(f"not counted: {problem}\n")
    sys.stdout.write(f"\nHF cache: {use.cache} ({size_text(use.cache_bytes)} in model repositories, "
                     "as huggingface_hub's scan_cache_dir reads it)\n")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    target = args.delete
    is_path = target.endswith(".gguf") or target.startswith(("/", "."))
    if not args.yes:
        use = disk_use()
        if is_path:
            found = next((f for f in use.local if str(f.path) == target), None)
            size = size_text(found.size_bytes) if found else "not a file the workbench made"
        else:
            found = next((r for r in use.repos if r.repo == target), None)
            size = size_text(found.size_bytes) if found else "not in the HF cache"
        raise WorkbenchError(f"would delete {target} ({size})", fix="Pass --yes to delete it")
    if is_path:
        deleted = delete_local_model(target)
    else:
        deleted = delete_cached_model(target, revision=args.revision)
    for path in deleted.kept:
        print(f"kept {path}: it belongs to another repository or lies outside this one", file=sys.stderr)
    if args.json:
        write_json({"deleted": deleted.what, "freed_bytes": deleted.freed_bytes, "kept": [str(p) for p in deleted.kept]})
    else:
        print(f"deleted {deleted.what}: {size_text(deleted.freed_bytes)} freed")
    return 0
