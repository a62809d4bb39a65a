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
    KeyFooter.-rows { layout: grid; grid-gutter: 0 1; }
    KeyFooter.-rows FooterKey { margin: 0; }  /* the gutter spaces the keys: a margin would cut each by one */
    """

    rows: reactive[int] = reactive(1, recompose=True)

    def compose(self):
        yield from super().compose()
        # Footer sets one grid column per key; with more rows, as many columns as the widest row needs
        keys = self.styles.grid_size_columns or 1
        self.styles.grid_size_columns = -(-keys // self.rows)
        self.styles.grid_columns = "auto"  # each column as wide as its widest key, never cut

    def watch_rows(self, rows: int) -> None:
        self.styles.height = rows
        self.set_class(rows > 1, "-rows")
