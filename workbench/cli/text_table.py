"""Plain-text tables for headless commands (no Rich: output stays pipe- and grep-friendly)."""

from __future__ import annotations

import shutil
import sys
import textwrap
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


def fitted_table(headers: Sequence[str], rows: Sequence[Sequence[object]], width: int | None, *,
                 right: Sequence[int] = (), details: dict[int, str] | None = None) -> str:
    """`format_table`, or on a terminal narrower than it the `details` columns (index -> label) moved to
    indented, wrapped lines under their row (80 columns otherwise wrap every row)."""
    table = format_table(headers, rows, right=right)
    if width is None or not details or max(len(line) for line in table.splitlines()) <= width:
        return table
    kept = [column for column in range(len(headers)) if column not in details]
    header, *lines = format_table([headers[c] for c in kept], [[row[c] for c in kept] for row in rows],
                                  right=[kept.index(c) for c in right if c in kept]).splitlines()
    out = [header]
    for line, row in zip(lines, rows):
        out.append(line)
        out += [wrap_text(f"    {label}{row[column]}", width, indent="    ") for column, label in details.items() if str(row[column])]
    return "\n".join(out) + "\n"


def terminal_width() -> int | None:
    """Columns of the terminal stdout writes to, or None for a pipe or file (whose lines stay whole for grep)."""

    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns


def wrap_text(text: str, width: int | None, *, indent: str = "  ") -> str:
    """One prose line wrapped to `width`, continuation lines indented (a longer word, e.g. a path, stays
    whole so it can be copied); unchanged when width is None."""
    if width is None or len(text) <= width:
        return text
    words = text.lstrip()  # the leading indent is kept apart: textwrap would drop it before an unbreakable word
    return "\n".join(textwrap.wrap(words, width=width, initial_indent=text[: len(text) - len(words)],
                                    subsequent_indent=indent, break_on_hyphens=False, break_long_words=False))
