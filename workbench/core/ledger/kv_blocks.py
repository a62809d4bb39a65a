"""The KV-cache panel's grid: which segment of the conversation fills each block of cells."""

from __future__ import annotations

from collections.abc import Sequence

FREE = "free"
MIN_BLOCK_TOKENS = 16


def kv_block_map(segments: Sequence[tuple[str, int]], n_ctx: int, n_blocks: int) -> tuple[str, ...]:
    """Label `n_blocks` equal blocks of an `n_ctx`-cell cache from `segments` in context order.

    `segments` are (label, n_tokens) pairs, e.g. (("system", 40), ("history", 300),
    ("current", 25)). A block shows the label holding most of its cells; a block that is
    only partly filled still shows its segment rather than "free", so a short segment
    never gives way to free space; a tie goes to the later segment. Tokens beyond `n_ctx` are ignored.
    """
    if n_blocks <= 0:
        return ()
    if n_ctx <= 0:
        return (FREE,) * n_blocks
    spans: list[tuple[str, int, int]] = []  # (label, first cell, end cell)
    cursor = 0
    for label, n_tokens in segments:
        if n_tokens <= 0 or cursor >= n_ctx:
            continue
        end = min(cursor + n_tokens, n_ctx)
        spans.append((label, cursor, end))
        cursor = end
    blocks = []
    span_index = 0
    for block in range(n_blocks):
        # integer bounds so every cell belongs to exactly one block even when n_ctx % n_blocks != 0
        start, stop = block * n_ctx // n_blocks, (block + 1) * n_ctx // n_blocks
        while span_index < len(spans) and spans[span_index][2] <= start:
            span_index += 1
        best_label, best_cells = FREE, 0
        index = span_index
        while index < len(spans) and spans[index][1] < stop:
            label, first, end = spans[index]
            cells = min(end, stop) - max(first, start)
            if cells >= best_cells and cells > 0:  # a tie goes to the later, more recent segment
                best_label, best_cells = label, cells
            index += 1
        blocks.append(best_label)
    return tuple(blocks)


def choose_block_tokens(n_ctx: int, max_cells: int) -> int:
    """Tokens per block: the smallest power of two >= 16 whose grid fits in `max_cells` cells."""
    tokens = MIN_BLOCK_TOKENS
    cells = max(1, max_cells)
    while -(-n_ctx // tokens) > cells:
        tokens *= 2
    return tokens


def window_cells_used(cells_used: int, window_cells: int) -> int:
    """Cells of a sliding-window cache in use when the full-context cache holds `cells_used`.

    The window cache keeps the newest tokens only: it fills like the full cache until its
    `window_cells` (window + one ubatch, padded to 256) are used, then stays full.
    """
    return max(0, min(cells_used, window_cells))


def window_bar(cells_used: int, window_cells: int, width: int) -> tuple[int, int]:
    """(filled, empty) characters of a `width`-wide bar for the window cache."""
    if window_cells <= 0 or width <= 0:
        return (0, max(0, width))
    filled = round(width * window_cells_used(cells_used, window_cells) / window_cells)
    return (filled, width - filled)
