"""KV-cache panel: the context as a grid of blocks coloured by what each holds."""

from __future__ import annotations

import math
from dataclasses import fields

from rich.console import Group, RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.core.ledger.kv_blocks import (
    choose_block_tokens,
    kv_block_map,
    window_bar,
    window_cells_used,
)
from workbench.core.units import mib
from workbench.ui.kv_view import KvView
from workbench.ui.widgets.colours import legend as swatch_legend
from workbench.ui.widgets.colours import theme_colour

BLOCK_STATES = ("system", "history", "reused", "current", "free")
KV_VIEW_FIELDS = tuple(field.name for field in fields(KvView))
TEXT_LINES = 4  # cells line, legend, bytes-per-block line, context-shift line (+1 with a window cache)


class KvPanel(Widget):
    """Draws a `KvView`: the screen calls `show(view)`; each field is also a reactive of its own."""

    BORDER_TITLE = "KV cache"
    EMPTY_TEXT = "No model loaded: the context appears here after loading."  # shown while n_ctx is 0

    n_ctx: reactive[int] = reactive(0)
    cells_used: reactive[int] = reactive(0)
    segments: reactive[tuple[tuple[str, int], ...]] = reactive(())
    bytes_per_token: reactive[int] = reactive(0)
    cache_types: reactive[str] = reactive("f16/f16")
    shift_notice: reactive[str] = reactive("")
    # A model with sliding-window layers keeps a second, smaller cache: set from the ledger's KVSplit.
    window_cells: reactive[int] = reactive(0)  # cells of the window cache (0 = no window layers)
    window_layers: reactive[str] = reactive("")  # e.g. "5 of 6 layers keep the last 512 tokens"
    layers_note: reactive[str] = reactive("")  # a hybrid model's attention and recurrent layers

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def show(self, view: KvView) -> None:
        """Draw `view`: one redraw for all of its fields (the grid is the costliest panel to draw)."""
        for name in KV_VIEW_FIELDS:
            self.set_reactive(getattr(KvPanel, name), getattr(view, name))
        self.refresh()

    def grid_shape(self) -> tuple[int, int]:
        """Columns and rows of blocks that fit the panel (each block is drawn 2 cells wide)."""
        width = self.content_region.width or 40
        height = self.content_region.height or 12
        note_lines = math.ceil(len(self.layers_note) / max(1, width - 1))  # the note wraps
        text_lines = TEXT_LINES + (1 if self.window_cells else 0) + note_lines
        return max(1, width // 2), max(1, height - text_lines)

    def render(self) -> RenderableType:
        if self.n_ctx <= 0:
            return Text(self.EMPTY_TEXT, style="italic")
        columns, rows = self.grid_shape()
        block_tokens = choose_block_tokens(self.n_ctx, columns * rows)
        n_blocks = math.ceil(self.n_ctx / block_tokens)
        labels = kv_block_map(self.segments, self.n_ctx, n_blocks)
        header = self._cells_line("global layers: " if self.window_cells else "")
        grid = Text()
        # one span per run of equal blocks within a row: a few segments to draw, not hundreds
        for row_start in range(0, len(labels), columns):
            if row_start:
                grid.append("\n")
            row = labels[row_start:row_start + columns]
            run_start = 0
            for index in range(1, len(row) + 1):
                if index == len(row) or row[index] != row[run_start]:
                    grid.append("■ " * (index - run_start), style=theme_colour(self.app, f"kv-{row[run_start]}"))
                    run_start = index
        legend = swatch_legend([(theme_colour(self.app, f"kv-{state}"), state) for state in BLOCK_STATES],
                               self.content_region.width or 40)  # a swatch never parts from its label
        parts: list[RenderableType] = [header, grid, legend, self._sizes_line(block_tokens)]
        if self.window_cells:
            parts.append(self._window_line(columns))
        if self.layers_note:
            parts.append(Text(self.layers_note, style="dim"))
        if self.shift_notice:
            parts.append(Text(f"⚠ {self.shift_notice}", style=f"bold {theme_colour(self.app, 'kv-current')}"))
        return Group(*parts)

    def _cells_line(self, prefix: str = "", suffix: str = "") -> Text:
        percent = 100 * self.cells_used / self.n_ctx
        return Text(f"{prefix}cells used {self.cells_used:,} / {self.n_ctx:,} ({percent:.0f}%){suffix}", style="bold")

    def _sizes_line(self, block_tokens: int, suffix: str = "") -> Text:
        block_bytes = self.bytes_per_token * block_tokens
        return Text(f"1 block = {block_tokens} tokens = {mib(block_bytes) if block_bytes else 'n/a'}"
                    f" at {self.cache_types}{suffix}", style="dim")

    def _window_line(self, columns: int) -> Text:
        """The window cache: its own cells, full once the conversation passes the window."""
        used = window_cells_used(self.cells_used, self.window_cells)
        filled, empty = window_bar(self.cells_used, self.window_cells, max(4, min(columns, 16)))
        line = Text("window cache ")
        line.append("■" * filled, style=theme_colour(self.app, "kv-current"))
        line.append("■" * empty, style=theme_colour(self.app, "kv-free"))
        line.append(f" {used:,} / {self.window_cells:,} cells")
        if self.window_layers:
            line.append(f" ({self.window_layers})", style="dim")
        return line


class SlotsKvPanel(KvPanel):
    """The KV panel of the Serve screen: each slot's cells while serving, a note when not."""

    EMPTY_TEXT = "Not serving: each slot's cells appear here while the API serves."
    slot_cells: reactive[tuple[int, ...]] = reactive(())  # set by the Serve screen from the engine's status
    slot_ctx: reactive[int] = reactive(0)  # the cells each slot may use (n_ctx / slots)

    def render(self) -> RenderableType:
        """A row of blocks per slot: its share of the one (unified) cache, used and free."""
        if self.n_ctx <= 0 or not self.slot_cells or self.slot_ctx <= 0:
            return Text(self.EMPTY_TEXT, style="italic")
        width = self.content_region.width or 40
        height = self.content_region.height or 12
        n_slots = len(self.slot_cells)
        label_width = len(f"slot {n_slots - 1} ")
        count_width = len(f" {self.slot_ctx:,}/{self.slot_ctx:,}")
        block_tokens = choose_block_tokens(self.slot_ctx, max(4, (width - label_width - count_width) // 2))
        n_blocks = math.ceil(self.slot_ctx / block_tokens)
        header = self._cells_line(suffix=f" · {n_slots} slots x {self.slot_ctx:,}")
        used_colour, free_colour = theme_colour(self.app, "kv-current"), theme_colour(self.app, "kv-free")
        room = max(1, height - TEXT_LINES)
        shown = self.slot_cells if n_slots <= room else self.slot_cells[:room - 1]
        rows = Text()
        for slot, cells in enumerate(shown):
            used = min(n_blocks, math.ceil(cells / block_tokens))
            if slot:
                rows.append("\n")
            rows.append(f"slot {slot}".ljust(label_width))
            rows.append("■ " * used, style=used_colour)
            rows.append("■ " * (n_blocks - used), style=free_colour)
            rows.append(f"{cells:,}/{self.slot_ctx:,}")
        if len(shown) < n_slots:
            rows.append(f"\n… {n_slots - len(shown)} more slots hold "
                        f"{sum(self.slot_cells[len(shown):]):,} cells", style="dim")
        legend = swatch_legend([(used_colour, "a request's cells"), (free_colour, "free")], width)
        return Group(header, rows, legend, self._sizes_line(block_tokens, "; the slots share one cache"))
