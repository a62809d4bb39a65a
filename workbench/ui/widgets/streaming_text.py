"""Plain text that grows at its end (an answer while it streams), drawn line by line."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget


class StreamingText(Widget):
    """Appending re-wraps only the paragraph still growing and repaints only its lines.

    A Static re-renders its whole text and asks for a layout of the screen on every update,
    and a layout of the screen costs ~20 ms of a core here. This widget reserves its height
    `reserve_lines` at a time (blank lines below the text until they fill), so a layout is
    needed once per that many lines; every other batch repaints the line or two that changed.
    """

    DEFAULT_CSS = """
    StreamingText { height: auto; }
    """

    def __init__(self, text: str = "", *, reserve_lines: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = ""
        self.reserve_lines = max(1, reserve_lines)
        self._width = 0  # the width the lines are wrapped to; 0 until the first layout
        self._settled_lines: list[str] = []  # wrapped lines of the finished paragraphs
        self._tail = ""  # the paragraph still growing (after the last newline)
        self._tail_lines: list[str] = []
        self._style_cache: Style | None = None
        # drawn on the line right after the text ("generating…", prefill progress): the reserved blank
        # lines come after it, never between the answer and its status
        self.status = ""
        self.append(text)

    @property
    def line_count(self) -> int:
        return len(self._settled_lines) + len(self._tail_lines) if self.text else 0

    @property
    def status_row(self) -> int:
        return self.line_count

    @property
    def reserved_height(self) -> int:
        used = self.line_count + (1 if self.status else 0)
        return max(1, -(-used // self.reserve_lines) * self.reserve_lines)

    def set_status(self, status: str) -> None:
        """Show `status` under the text; a repaint of one line unless the height has to grow."""
        if status == self.status:
            return
        height_before = self.reserved_height
        self.status = status
        if self.reserved_height != height_before:
            self.refresh(layout=True)
        else:
            self.refresh(Region(0, self.status_row, self.size.width, 1))

    def append(self, fragment: str) -> None:
        if not fragment:
            return
        self.text += fragment
        *finished, self._tail = (self._tail + fragment).split("\n")
        if not self._width:
            return  # wrapped once the width is known
        first_changed, height_before = len(self._settled_lines), self.reserved_height
        for paragraph in finished:
            self._settled_lines.extend(self._wrap(paragraph))
        self._tail_lines = self._wrap(self._tail)
        if self.reserved_height != height_before:
            self.refresh(layout=True)
        else:  # the changed lines and the status line that moved down with them
            self.refresh(Region(0, first_changed, self.size.width, self.line_count + 1 - first_changed))

    def _wrap(self, paragraph: str) -> list[str]:
        if not paragraph:
            return [""]
        return [line.plain.rstrip() for line in Text(paragraph, end="").wrap(self.app.console, self._width)]

    def _wrap_all(self, width: int) -> None:
        if width <= 0 or width == self._width:
            return
        self._width = width
        *finished, tail = self.text.split("\n")
        self._settled_lines = [line for paragraph in finished for line in self._wrap(paragraph)]
        self._tail_lines = self._wrap(tail)

    def _line_style(self) -> Style:
        # computing a widget's style walks its ancestors: once per repaint, not once per line
        if self._style_cache is None:
            self._style_cache = self.rich_style
        return self._style_cache

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_cache = None

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._wrap_all(width)
        return self.reserved_height

    def render_line(self, y: int) -> Strip:
        self._wrap_all(self.content_region.width)
        style = self._line_style()
        width = self.content_region.width
        if self.status and y == self.status_row:
            status_style = style + Style(dim=True, italic=True)
            return Strip([Segment(self.status[:width], status_style)]).extend_cell_length(width, style)
        settled = len(self._settled_lines)
        if y >= self.line_count:
            text = ""
        elif y < settled:
            text = self._settled_lines[y]
        else:
            text = self._tail_lines[y - settled] if y - settled < len(self._tail_lines) else ""
        return Strip([Segment(text, style)]).extend_cell_length(width, style)
