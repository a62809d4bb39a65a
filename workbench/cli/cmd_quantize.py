"""`workbench quantize SRC --to TYPE [-o OUT]`: re-quantize a GGUF with llama.cpp's quantizer."""

from __future__ import annotations

import argparse
import sys

from workbench.core.engine.quantize import cached_quantized_path, quantize, weights_type_name
from workbench.core.files.model_ref import resolve_model


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "quantize",
        help="re-quantize a GGUF model to another weight type",
        description="Run llama.cpp's quantizer on SRC (a .gguf path or 'bundled'). Without -o the result goes "
        "to the workbench's cache, keyed by the source and the type, where presets find it. "
        "`workbench quantize bundled --to F16` makes a full-precision source from the bundled model.",
    )
    parser.add_argument("src", metavar="SRC", help="the model to quantize: a .gguf path or 'bundled'")
    parser.add_argument("--to", required=True, metavar="TYPE", help="weight type: Q4_K_M, Q8_0, F16, ...")
    parser.add_argument("-o", "--output", metavar="OUT", help="write here instead of the cache (a file already "
                        "there is refused without --force)")
    parser.add_argument("--force", action="store_true", help="replace the file at -o OUT if there is one")
    parser.set_defaults(func=run)


class _ProgressLine:
    """Progress on one rewritten line on a terminal, and every 10% on its own line otherwise."""

    def __init__(self, stream) -> None:  # noqa: ANN001 - a text stream
        self._stream = stream
        self._tty = stream.isatty()
        self._last_step = -1

    def __call__(self, fraction: float) -> None:
        if self._tty:
            filled = int(fraction * 30)
            self._stream.write(f"\rquantizing [{'#' * filled}{'.' * (30 - filled)}] {fraction * 100:5.1f}%")
            self._stream.flush()
            return
        step = int(fraction * 10)
        if step > self._last_step:
            self._last_step = step
            print(f"quantizing: {step * 10}%", file=self._stream, flush=True)

    def end(self) -> None:
        if self._tty:
            self._stream.write("\n")


def run(args: argparse.Namespace) -> int:

    source = resolve_model(args.src)
    target = weights_type_name(args.to)  # unknown types are refused before anything starts
    if args.output is None and cached_quantized_path(source, target).is_file():
        print("already in the cache", file=sys.stderr)
    progress = _ProgressLine(sys.stderr)
    try:
        path = quantize(
            source, target, args.output, on_progress=progress,
            on_warning=lambda text: print(f"warning: {text}", file=sys.stderr, flush=True), overwrite=args.force,
        )
    finally:
        progress.end()
    size_mb = path.stat().st_size / 1e6
    print(f"{path}  ({target}, {size_mb:.1f} MB)")
    return 0
