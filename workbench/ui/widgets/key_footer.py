"""The footer of the main screen: every key binding, in two rows when one row of the terminal cannot hold them."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Footer


class KeyFooter(Footer):
    """Textual's Footer, whose keys wrap onto `rows` rows (the screen sets it from its width), and which
    rebuilds its keys only when what it shows changed.

    One row of Footer scrolls sideways out of sight: at 80 and 120 columns the keys from F6 on
    (Serve, Restart, New chat, Quit) could not be seen at all. Footer rebuilds all its keys (a
    widget each, styled anew) after every focus change and every refresh_bindings, once per call
    even when several come before a refresh: over a chat turn that is some hundred rebuilds of an
    unchanged row, a third of the CPU the app spends drawing.
    """

    DEFAULT_CSS = """
    KeyFooter.-rows { layout: grid; grid-gutter: 0 1; }
    KeyFooter.-rows FooterKey { margin: 0; }  /* the gutter spaces the keys: a margin would cut each by one */
    """

    rows: reactive[int] = reactive(1, recompose=True)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._rebuild_pending = False
        self._composed: tuple | None = None

    def shown_keys(self) -> tuple:
        """What the keys show: each shown binding's key, label, action, state and tooltip, in order."""
        palette = self.app.COMMAND_PALETTE_BINDING  # a key of its own at the end, shown or not
        return tuple(
            (binding.key, self.app.get_key_display(binding), binding.description, binding.action, enabled,
             tooltip, binding.group)
            for key, (_, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette)

    def bindings_changed(self, screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen or self._rebuild_pending:
            return
        self._rebuild_pending = True
        self.call_after_refresh(self._rebuild_if_changed)

    async def _rebuild_if_changed(self) -> None:
        self._rebuild_pending = False
        if self.is_attached and self.shown_keys() != self._composed:
            await self.recompose()

    def compose(self):
        if self._bindings_ready:
            self._composed = self.shown_keys()
        yield from super().compose()
        # Footer sets one grid column per key; with more rows, as many columns as the widest row needs
        keys = self.styles.grid_size_columns or 1
        self.styles.grid_size_columns = -(-keys // self.rows)
        self.styles.grid_columns = "auto"  # each column as wide as its widest key, never cut

    def watch_rows(self, rows: int) -> None:
        self.styles.height = rows
        self.set_class(rows > 1, "-rows")
