"""The footer of the main screen: every key binding, in two rows when one row of the terminal cannot hold them."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Footer


class KeyFooter(Footer):
    """Textual's Footer, whose keys wrap onto `rows` rows (the screen sets it from its width).

    One row of Footer scrolls sideways out of sight: at 80 and 120 columns the keys from F6 on
    (Serve, Restart, New chat, Quit) could not be seen at all.
    """

    DEFAULT_CSS = """
    KeyFooter.-rows { layout: grid; grid-columns: auto; grid-gutter: 0 1; }
    """

    rows: reactive[int] = reactive(1, recompose=True)

    def compose(self):
        yield from super().compose()
        # Footer sets one grid column per key; with more rows, as many columns as the widest row needs
        keys = self.styles.grid_size_columns or 1
        self.styles.grid_size_columns = -(-keys // self.rows)

    def watch_rows(self, rows: int) -> None:
        self.styles.height = rows
        self.set_class(rows > 1, "-rows")
