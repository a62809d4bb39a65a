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
