"""`workbench download REPO[:QUANT] [FILE]` (or `--quant Q4_K_M`): resumable, verified download into the HF cache."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from workbench.cli.json_output import write_json
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset
from workbench.core.errors import GGUFError, WorkbenchError
from workbench.core.fit.options import best_file_for
from workbench.core.fit.types import FitRequest
from workbench.core.gguf.reader import read_gguf
from workbench.core.hub import download_events as ev
from workbench.core.hub.download import download_model
from workbench.core.hub.download_events import DownloadCancelled
from workbench.core.hub.files import list_gguf_files
from workbench.core.hub.preview import preview_fit
from workbench.core.hub.short_ref import files_of_tag, parse_short_ref, pick_file
from workbench.core.units import eta_text, rate_text, size_text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "download",
        help="download a GGUF model from the hub (resumes, verifies sha256)",
        description="Download a GGUF file (every part of a split one) into the Hugging Face cache "
        "(HF_HUB_CACHE / HF_HOME). A stopped or interrupted download resumes from the bytes on disk "
        "when run again; the file is checked against the hub's sha256 before it is usable. "
        "Prints the model's path when done. REPO alone picks the Q4_K_M file (else the only one); "
        "REPO:QUANT picks by quantization type (as llama.cpp's -hf); with --device and no FILE, the "
        "file `workbench fit` picks for the device (the least quality lost that fits, from the headers).",
    )
    parser.add_argument("repo", help="owner/repo or owner/repo:QUANT, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M")
    parser.add_argument("file", nargs="?", help="file name (see `workbench files REPO`)")
    parser.add_argument("--quant", help="pick the file by quantization type instead, e.g. Q4_K_M")
    parser.add_argument("--revision", default="main", help="branch or commit (default: main)")
    parser.add_argument("--device", help="first check (header only) that the model fits this device; refuse if not")
    parser.add_argument("--preset", default="as-is", help="preset for the --device check (default: as-is)")
    parser.add_argument("--anyway", action="store_true", help="download even when the --device check says it does not fit")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ref = parse_short_ref(args.repo)
    args.repo = ref.repo
    if sum(map(bool, (args.file, args.quant, ref.tag))) > 1:
        raise WorkbenchError("give one of FILE, --quant or REPO:QUANT", fix=f"See the files with `workbench files {ref.repo}`")
    listing = list_gguf_files(ref.repo, revision=args.revision)
    tag = ref.tag or args.quant or ""
    if args.device and not args.file:
        model = _best_fitting(listing, tag, args)
    else:
        model = listing.find(args.file) if args.file else pick_file(listing, tag)
        if args.device:
            _check_fit(args, listing.repo, model)
    filename = model.name
    printer = _ProgressPrinter(sys.stderr)
    cancel, finished = threading.Event(), threading.Event()
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["result"] = download_model(args.repo, filename, revision=args.revision, on_event=printer, cancel=cancel)
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            outcome["error"] = error
        finally:
            finished.set()

    # The transfer runs in a thread so Ctrl-C reaches the main thread, which asks it to stop
    # between chunks: the partial file stays consistent and the next run resumes from it.
    # (Waiting on an Event, not Thread.join: a join interrupted by Ctrl-C can return early.)
    threading.Thread(target=work, name="download", daemon=True).start()
    try:
        while not finished.wait(0.2):
            pass
    except KeyboardInterrupt:
        cancel.set()
        print("\nworkbench: stopping the download (the partial file is kept)…", file=sys.stderr)
        finished.wait()
    printer.end_line()
    error = outcome.get("error")
    if isinstance(error, DownloadCancelled):
        print(f"workbench: interrupted: {error}", file=sys.stderr)
        return 130
    if error is not None:
        raise error
    result = outcome["result"]
    snapshot = Path(str(result.path)[: -len(model.parts[0].path)])
    for part in model.parts:  # every part of a split file is a GGUF of its own
        _check_usable(snapshot / part.path, listing.repo)
    if args.json:
        write_json({"repo": result.repo, "file": result.filename, "path": str(result.path), "size_bytes": result.size_bytes,
                    "fetched_bytes": result.fetched_bytes, "already_cached": result.already_cached,
                    "seconds": round(result.seconds, 3)})
    else:
        if result.already_cached:
            print(f"already in the cache: {result.filename}", file=sys.stderr)
        print(result.path)
    return 0


def _check_usable(path, repo: str) -> None:
    """A file that matches the hub's sha256 can still be no model (an HTML page or a cut file
    uploaded as .gguf): say so instead of printing its path as the model to load."""

    try:
        read_gguf(path)
    except GGUFError as error:
        raise WorkbenchError(f"downloaded and sha256-verified, but not a usable GGUF: {error.what}", where=str(path),
                             fix=f"The repository's file itself is broken: pick another with `workbench files {repo}`") from error


def _best_fitting(listing, tag: str, args: argparse.Namespace):
    """The file the fit search (workbench fit's, from the headers) picks for --device among the tag's files."""
    device = load_device(args.device)
    result = best_file_for(files_of_tag(listing, tag), device, FitRequest(base=load_preset(args.preset)))
    if result.chosen is None:
        raise WorkbenchError(f"no file of {listing.repo} fits {device.name}: {result.reason}",
                             fix=f"See `workbench fit {listing.repo} --device {args.device}`, or name a file and pass --anyway")
    chosen = result.chosen
    print(f"fit check ({args.preset} on {device.name}): {chosen.option.filename} picked by the fit search "
          f"({result.reason}); largest context that fits: {chosen.ctx:,}", file=sys.stderr)
    for change in result.changes:
        print(f"  to fit, the preset needs {change.key} {change.old} -> {change.new} ({change.why})", file=sys.stderr)
    return listing.find(chosen.option.filename)


def _check_fit(args: argparse.Namespace, repo: str, model) -> None:
    """Read the header remotely and refuse a model that cannot fit the device (unless --anyway)."""

    preview = preview_fit(repo, model.name, load_preset(args.preset), load_device(args.device),
                          revision=args.revision, listing=model)
    ctx = f"largest context that fits: {preview.largest_ctx:,}" if preview.largest_ctx else "no context fits"
    print(f"fit check ({preview.preset} on {preview.device}): {preview.ledger.verdict}; {ctx}", file=sys.stderr)
    if not preview.fits and not args.anyway:
        raise WorkbenchError(
            f"{model.name} does not fit {preview.device} with preset {preview.preset} ({preview.ledger.reason})",
            fix=f"Pick a smaller file (`workbench files {repo} --preview --device {args.device}`) or pass --anyway",
        )


class _ProgressPrinter:
    """One progress line: rewritten in place on a terminal, a line every 10% when piped to a log."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self._open_line = False
        self._last_decile = -1
        self._last_write = 0.0

    def __call__(self, event) -> None:

        if isinstance(event, ev.DownloadStarted):
            part = f" (part {event.part}/{event.parts})" if event.parts > 1 else ""
            resumed = f", resuming from {size_text(event.resumed_from_bytes)}" if event.resumed_from_bytes else ""
            self._line(f"{event.repo}/{event.filename}{part}: {size_text(event.total_bytes)}{resumed}", final=True)
        elif isinstance(event, ev.DownloadProgressed):
            text = (f"  {event.fraction:6.1%}  {size_text(event.done_bytes)} of {size_text(event.total_bytes)}"
                    f"  {rate_text(event.rate_bytes_per_s)}  {eta_text(event.eta_s)}")
            decile = int(event.fraction * 10)
            if self.tty:
                if time.monotonic() - self._last_write >= 0.2 or event.done_bytes >= event.total_bytes:
                    self._line(text, final=False)
            elif decile != self._last_decile:
                self._last_decile = decile
                self._line(text, final=True)
        elif isinstance(event, ev.DownloadRetried):
            self._line(f"  transfer interrupted: {event.reason}; resuming from {size_text(event.resume_from_bytes)} "
                       f"[attempt {event.attempt + 1}/{event.max_attempts}]", final=True)
        elif isinstance(event, ev.DownloadVerified):
            self._line(f"  verified: {event.checked_against} {event.sha256[:16]}…", final=True)

    def _line(self, text: str, *, final: bool) -> None:
        self._last_write = time.monotonic()
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
            self._open_line = not final
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def end_line(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False
