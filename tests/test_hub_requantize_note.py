"""The hub preview with a preset that re-quantizes says the preset decides the weights (every file of the model then
predicts the same), and says nothing of the kind for a preset that keeps the file's weights."""

from __future__ import annotations

import pytest
from fakes import wait_until
from hubserver import hub  # noqa: F401 - hub is a fixture
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from workbench.core.config.presets import load_preset
from workbench.core.paths import bundled_model_path
from workbench.ui.widgets.hub_browser import HubBrowser

REPO = "bartowski/SmolLM2-135M-Instruct-GGUF"  # the first curated repository: listed on mount
FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"


class Host(App):
    def __init__(self, preset) -> None:
        super().__init__()
        self.preset = preset

    def compose(self) -> ComposeResult:
        yield HubBrowser(self.preset, "raspberry-pi-5-8gb")


@pytest.mark.parametrize("preset,note", [(lambda: load_preset("quality-q8"), True), (lambda: "quality-q8", True),
                                         (lambda: "as-is", False)])
async def test_the_preview_says_when_the_preset_decides_the_weights(hub, preset, note):  # noqa: F811
    hub.add_repo(REPO, {FILE: bundled_model_path()}, downloads=4_000)
    app = Host(preset())
    async with app.run_test(size=(180, 50)) as pilot:
        files = app.query_one("#hub-files", DataTable)
        await wait_until(pilot, lambda: files.row_count == 1, what="the curated repository's files")
        files.focus()
        files.move_cursor(row=0)
        shown = lambda: str(app.query_one("#hub-preview", Static).render())  # noqa: E731
        await wait_until(pilot, lambda: " on raspberry-pi-5-8gb: " in shown(), what="the fit preview")
        text = " ".join(shown().split())
        assert ("the preset re-quantizes to Q8_0: the preset decides the weights, not this file's quant" in text) is note
