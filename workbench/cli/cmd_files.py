"""`workbench files REPO`: a repository's GGUF files with size and quant; `--preview`: fit before download."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from workbench.cli import text_table
from workbench.cli.cmd_ledger import ledger_text, mb_text
from workbench.cli.json_output import write_json
from workbench.cli.speed_text import short_speed, speed_json
from workbench.cli.text_table import fitted_table, format_table, wrap_text
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset
from workbench.core.errors import HubError, WorkbenchError
from workbench.core.hub.files import RemoteFile, RepoFiles, group_gguf_files, list_gguf_files
from workbench.core.hub.header_cache import stored_header_files
from workbench.core.hub.preview import preview_fit
from workbench.core.units import size_text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "files",
        help="list a hub repository's GGUF files; --preview shows whether each fits, before downloading",
        description="List the GGUF files of a hub repository with size and quantization type (split files "
        "grouped). --preview reads each file's header with HTTP range requests (a few MB, cached for "
        "offline use) and predicts its memory ledger for PRESET on DEVICE with the largest context that fits.",
    )
    parser.add_argument("repo", help="repository id, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
    parser.add_argument("--file", help="only this file (its full ledger is printed with --preview)")
    parser.add_argument("--preview", action="store_true", help="read headers remotely and predict the fit")
    parser.add_argument("--preset", default="as-is", help="preset for the preview (default: as-is, the file unchanged)")
    parser.add_argument("--device", default="host", help="device for the preview (default: host)")
    parser.add_argument("--revision", default="main", help="branch or commit (default: main)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    offline_reason = ""
    try:
        listing = list_gguf_files(args.repo, revision=args.revision)
    except HubError as error:
        listing = _listing_from_header_cache(args.repo, args.revision) if args.preview else None
        if listing is None or not listing.files:
            raise
        offline_reason = error.what
    files = (listing.find(args.file),) if args.file else listing.files
    previews, preset, device = _previews(listing.repo, files, args) if args.preview else ({}, None, None)
    if args.json:
        write_json({**_json(listing, files, previews), "offline": offline_reason or None})
        return 0
    if offline_reason:
        sys.stdout.write(f"offline ({offline_reason}): previews from the header cache\n\n")
    sys.stdout.write(_table(listing, files, previews, args))
    preview = previews.get(files[0].name) if len(files) == 1 else None
    if preview is not None and not isinstance(preview, Exception):
        # One file asked for: its whole ledger, as `workbench ledger` prints it for a local file.
        sys.stdout.write("\n" + ledger_text(preview.ledger, preset.weights, device.mem_bandwidth_gbs,
                                             preview.header.model.n_ctx_train, text_table.terminal_width()))
    return 0


def _listing_from_header_cache(repo: str, revision: str):
    """The files whose headers an earlier preview stored: previewed at the office, shown again in
    the field without the hub (the hub's listing is what needs the network, not the preview)."""

    stored = tuple(RemoteFile(path, size, sha256) for path, size, sha256 in stored_header_files(repo.strip().strip("/")))
    return RepoFiles(repo=repo, revision=revision, commit="", gated=False, files=group_gguf_files(stored))


# Each preview fetches a header (up to the reader's limit) over the network. Real repositories hold
# a few dozen GGUF files (one per quant); a listing naming thousands would keep --preview busy for hours.
MAX_PREVIEWS = 64


def _previews(repo: str, files, args) -> tuple:
    """(name -> FitPreview, or the one-line error that stopped its preview (a projector file, a bad
    header), for the first MAX_PREVIEWS files; the preset; the device)."""

    preset, device = load_preset(args.preset), load_device(args.device)
    previews: dict = {}
    for gguf_file in files[:MAX_PREVIEWS]:
        try:
            previews[gguf_file.name] = preview_fit(repo, gguf_file.name, preset, device, revision=args.revision, listing=gguf_file)
        except HubError:
            raise  # the hub itself failed: stop, do not fill the table with the same error
        except WorkbenchError as error:
            previews[gguf_file.name] = error
    return previews, preset, device


def _table(listing, files, previews: dict, args) -> str:
    width = text_table.terminal_width()
    title = f"{listing.repo} @ {listing.commit[:12] or listing.revision}" + ("  (gated: accept the licence on the hub, set HF_TOKEN)" if listing.gated else "")
    lines = [wrap_text(title, width) + "\n\n"]
    if not files:
        lines.append("No GGUF files in this repository.\n")
        return "".join(lines)
    if not previews:
        rows = [(f.name, f.quant or "?", size_text(f.size_bytes), len(f.parts)) for f in files]
        lines.append(format_table(("FILE", "QUANT", "SIZE", "PARTS"), rows, right=(2, 3)))
        lines.append(f"\nFit before download: workbench files {listing.repo} --preview [--preset P --device D]\n")
        return "".join(lines)
    rows = []
    fetched = cached = 0
    for f in files:
        preview = previews.get(f.name)
        if preview is None:
            rows.append((f.name, f.quant or "?", size_text(f.size_bytes), "not previewed", "", "", ""))
            continue
        if isinstance(preview, Exception):
            # A split file's error must say which part is broken: "where" ends with the part's name.
            part = preview.where.split(" (")[0].rsplit("/", 1)[-1] if len(f.parts) > 1 else ""
            rows.append((f.name, f.quant or "?", size_text(f.size_bytes), "unreadable", "", "",
                         f"{part}: {preview.what}" if part else preview.what))
            continue
        header = preview.header
        fetched += header.bytes_fetched
        cached += header.from_cache
        rows.append((f.name, _quant_cell(header), size_text(f.size_bytes), preview.ledger.verdict,
                     f"{preview.largest_ctx:,}", short_speed(preview.ledger.speed), _ledger_cell(preview.ledger)))
    first = next((p for p in previews.values() if not isinstance(p, Exception)), None)
    if first is not None:
        lines.append(f"preset {first.preset} on {first.device}\n")
        if first.ledger.speed is not None:  # one basis for the table: the same device and preset for every row
            lines.append(wrap_text(f"speed: {first.ledger.speed.method}, band x{first.ledger.speed.band[0]:.2f}-"
                                   f"x{first.ledger.speed.band[1]:.2f} (nothing measured before download; "
                                   f"`workbench ledger` gives the basis)", width) + "\n")
        lines.append("\n")
    lines.append(fitted_table(("FILE", "QUANT", "SIZE", "FIT", "LARGEST CTX", "TOK/S DECODE / PP512", "PREDICTED"),
                              rows, width, right=(2, 4, 5),
                              details={6: "predicted ", 5: "speed, tok/s decode / pp512: "}))
    unreadable = sum(isinstance(preview, Exception) for preview in previews.values())
    # The bytes an unreadable file's preview fetched are not known here: say so rather than count them as 0.
    left_out = f" (not counting the {unreadable} unreadable)" if unreadable else ""
    lines.append(f"\nheaders: {size_text(fetched)} fetched with range requests{left_out}, "
                 f"{cached} of {len(previews)} from the header cache\n")
    if len(files) > len(previews):
        lines.append(f"{len(files) - len(previews)} more file(s) not previewed (at most {MAX_PREVIEWS} a listing): "
                     f"preview one with --file NAME\n")
    return "".join(lines)


def _quant_cell(header) -> str:
    if header.header_quant is None:
        return f"{header.name_quant or '?'} (header: no file_type)"
    if header.quant_confirmed:
        return f"{header.header_quant} ✓"
    return f"{header.header_quant} (name says {header.name_quant or 'nothing'})"


def _ledger_cell(ledger) -> str:
    return (f"{mb_text(ledger.total_bytes)} of {mb_text(ledger.budget_bytes)} MiB "
            f"(weights {mb_text(ledger.weights_bytes)}, KV {mb_text(ledger.kv_bytes)} at ctx {ledger.ctx_size})")


def _json(listing, files, previews: dict) -> dict:
    out = {"repo": listing.repo, "revision": listing.revision, "commit": listing.commit, "gated": listing.gated, "files": []}
    for f in files:
        entry = {"name": f.name, "quant": f.quant, "size_bytes": f.size_bytes,
                 "parts": [{"path": p.path, "size_bytes": p.size_bytes, "sha256": p.sha256} for p in f.parts]}
        preview = previews.get(f.name)
        if isinstance(preview, Exception):
            entry["preview_error"] = str(preview)
        elif preview is not None:
            header = preview.header
            ledger = asdict(preview.ledger)
            ledger["reserves_bytes"] = dict(preview.ledger.reserves_bytes)
            ledger["max_ctx_by_kv_type"] = dict(preview.ledger.max_ctx_by_kv_type)
            entry["preview"] = {
                "preset": preview.preset, "device": preview.device, "header_quant": header.header_quant,
                "quant_confirmed": header.quant_confirmed, "header_bytes_fetched": header.bytes_fetched,
                "from_header_cache": header.from_cache, "largest_ctx": preview.largest_ctx, "ledger": ledger,
                **speed_json(preview.ledger.speed),
                "model": {"architecture": header.model.architecture, "name": header.model.name,
                          "n_params": header.model.n_params, "n_layer": header.model.n_layer,
                          "n_ctx_train": header.model.n_ctx_train},
            }
        out["files"].append(entry)
    return out
