"""Plain-text tables for headless commands (no Rich: output stays pipe- and grep-friendly)."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *,
                 right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart; `right` lists right-aligned columns."""
    cells = [[str(header) for header in headers]] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell.rjust(width) if column in right else cell.ljust(width)
                  for column, (cell, width) in enumerate(zip(row, widths))]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines) + "\n"


def terminal_width() -> int | None:
    """Columns of the terminal stdout writes to, or None for a pipe or file (whose lines stay whole for grep)."""
    import shutil
    import sys

    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns


def wrap_text(text: str, width: int | None, *, indent: str = "  ") -> str:
    """One prose line wrapped to `width`, continuation lines indented; unchanged when width is None."""
    import textwrap

    if width is None or len(text) <= width:
        return text
    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent=indent, break_on_hyphens=False))
