"""A one-line progress bar on a stream: redrawn in place on a terminal, a line a step elsewhere."""

from __future__ import annotations

from typing import TextIO


def draw_bar(stream: TextIO, done: int, total: int, label: str, *, done_line: bool = False) -> None:
    width = 30
    if done_line:
        stream.write(f"\r\x1b[2K{label}\n" if stream.isatty() else f"{label}\n")
    else:
        filled = int(width * done / total) if total else 0
        text = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"
        stream.write(f"\r\x1b[2K{text}" if stream.isatty() else f"{text}\n")
    stream.flush()
