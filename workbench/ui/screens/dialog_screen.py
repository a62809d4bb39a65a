"""The frame every modal dialog shares: content that scrolls inside the screen, buttons that stay in view."""

from __future__ import annotations

from textual.screen import ModalScreen, ScreenResultType
from textual.widget import Widget


class DialogScreen(ModalScreen[ScreenResultType]):
    """A modal whose `.dialog` container scrolls and whose `.dialog-buttons` are docked at its bottom (modals.tcss).

    At 80x24 a dialog can be taller than the screen: its content scrolls and the buttons stay on screen.
    Textual scrolls a focused field into view only when it lies outside the scrolling area; a field
    under the docked buttons counts as hidden too, so Tab never lands on a field that cannot be seen.
    """

    CSS_PATH = "modals.tcss"

    def can_view_entire(self, widget: Widget) -> bool:
        if not super().can_view_entire(widget):
            return False
        buttons = self.query(".dialog-buttons")
        if not buttons:
            return True
        bar = buttons.first()
        if widget is bar or bar in widget.ancestors:
            return True
        return widget.region.bottom <= bar.region.y - bar.styles.margin.top
