"""The choice bar: the model, preset and device selectors and the Load button; it owns the selection."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Button, Select

from workbench.core.config.preset import Preset
from workbench.ui.engine_session import Phase
from workbench.ui.fit_work import fit_label, fit_notice
from workbench.ui.loaded_choice import Choice
from workbench.ui.messages import FitFailed, FitSearched
from workbench.ui.selection import (
    Selection,
    device_options,
    model_options,
    preset_options,
)

BUTTON_LABELS = {Phase.IDLE: "Load", Phase.LOADING: "Loading…", Phase.LOADED: "Unload",
                 Phase.GENERATING: "Unload", Phase.UNLOADING: "Unloading…"}
LOAD_KEY_LABELS = ("Load", "Unload", "Reload")  # what Ctrl+L does, as the button says it


class ChoiceBar(Horizontal):
    """Owns the `Selection`; the screen sets `phase` and `loaded` (what the engine runs) for the button."""

    @dataclass
    class Changed(Message):
        """The user chose another model, preset or device."""

        choice: Choice

    @dataclass
    class LoadPressed(Message):
        """The Load / Unload / Reload button was pressed."""

    @dataclass
    class FitPressed(Message):
        """The Fit button was pressed: search the preset that fits the chosen device (workbench fit)."""

    phase: reactive[Phase] = reactive(Phase.IDLE, init=False)
    loaded: reactive[Choice | None] = reactive(None, init=False)

    def __init__(self, selection: Selection, **kwargs) -> None:
        super().__init__(**kwargs)
        self.selection = selection

    @property
    def choice(self) -> Choice:
        return self.selection.choice()

    @property
    def reload_offered(self) -> bool:
        """A model is loaded and the selectors name another: the button reloads."""
        return self.phase == Phase.LOADED and self.loaded is not None and self.loaded != self.choice

    @property
    def button_label(self) -> str:
        """What the Load button says: Load, Unload, Reload, Loading… or Unloading…."""
        return "Reload" if self.reload_offered else BUTTON_LABELS[self.phase]

    def compose(self) -> ComposeResult:
        selection = self.selection
        yield Select(model_options(selection), id="model-select", allow_blank=False,
                     value=str(selection.model_path), prompt="model")
        yield Select(preset_options(selection), id="preset-select", allow_blank=False,
                     value=selection.preset_name, prompt="preset")
        yield Button("Fit", id="fit-button", tooltip="choose the preset that fits this device and loses the least "
                     "quality (workbench fit)")
        yield Select(device_options(selection), id="device-select", allow_blank=False,
                     value=selection.device_name, prompt="device")
        yield Button("Load", id="load-button", variant="primary")

    def on_mount(self) -> None:
        self._show_phase()

    def watch_phase(self) -> None:
        # usable while an answer streams (a change only re-predicts; loading uses it): restyling
        # three selects on and off costs ~50 ms of a core at each turn's start and end
        for select in self.query(Select):
            select.disabled = self.phase in (Phase.LOADING, Phase.UNLOADING)
        self._show_phase()

    def watch_loaded(self) -> None:
        self._show_phase()

    def _show_phase(self) -> None:
        """Load, Unload, or Reload when the selectors name something other than what is loaded."""
        reload = self.reload_offered
        button = self.query_one("#load-button", Button)
        button.label = self.button_label
        button.disabled = self.phase in (Phase.LOADING, Phase.UNLOADING)
        button.variant = "primary" if self.phase == Phase.IDLE or reload else "default"

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.value is Select.BLANK:
            return
        selection = self.selection
        current = {"model-select": str(selection.model_path), "preset-select": selection.preset_name,
                   "device-select": selection.device_name}
        if current.get(event.select.id or "") == str(event.value):
            return  # the initial value announcing itself: the prediction is already running
        if event.select.id == "model-select":
            selection.model_path = Path(str(event.value))
        elif event.select.id == "preset-select":
            selection.preset_name = str(event.value)
        elif event.select.id == "device-select":
            selection.device_name = str(event.value)
        self._chosen()

    @on(Button.Pressed, "#fit-button")
    def _fit_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(self.FitPressed())

    def on_descendant_focus(self, event) -> None:
        """The device list is read again when its selector gets focus: a profile added meanwhile is offered."""
        if getattr(event.widget, "id", None) != "device-select":
            return
        shown = self.selection.device_names()
        options = device_options(self.selection, refresh=True)
        if self.selection.device_names() != shown:
            select = self.query_one("#device-select", Select)
            current = select.value
            with select.prevent(Select.Changed):  # set_options picks the first option on the way: no choice made
                select.set_options(options)
                select.value = current

    @on(Button.Pressed, "#load-button")
    def _load_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.post_message(self.LoadPressed())

    def _chosen(self) -> None:
        self._show_phase()
        self.post_message(self.Changed(self.choice))

    def select_model(self, path: Path, label: str | None = None) -> None:
        """Make `path` the chosen model, adding it to the list if new."""
        self.selection.add_model(path, label)
        select = self.query_one("#model-select", Select)
        select.set_options(model_options(self.selection))
        select.value = str(path)
        self.selection.model_path = path
        self._chosen()

    def offer_model(self, path: Path, label: str | None = None) -> None:
        """Add a model (a finished download) to the model list without switching to it."""
        self.selection.add_model(path, label)
        select = self.query_one("#model-select", Select)
        current = select.value
        select.set_options(model_options(self.selection))
        select.value = current

    def select_preset(self, name: str) -> None:
        """Choose the preset `name`, reading the list again (a save or a revert changes what a name means)."""
        select = self.query_one("#preset-select", Select)
        select.set_options(preset_options(self.selection, refresh=True))
        select.value = name
        self.selection.preset_name = name
        self._chosen()

    def use_unsaved(self, preset: Preset, label: str | None = None) -> None:
        """Choose an edited preset for this session only (nothing is written)."""
        self.select_preset(self.selection.use_unsaved(preset, label))

    def on_fit_searched(self, message: FitSearched) -> None:
        """Offer the fit search's choice as an unsaved preset (the prediction follows), or say why nothing
        fits. A search from a choice left while it ran is not applied to the one chosen now."""
        message.stop()
        result = message.result
        if message.choice != self.choice:
            self.notify("The choice changed while the fit search ran: press Fit again to search from this one.",
                        title="Fit", severity="warning", timeout=10)
            return
        if result.chosen is None:
            self.notify(result.reason, title="Nothing fits", severity="warning", timeout=12)
            return
        self.use_unsaved(result.chosen.preset)
        self.notify(fit_notice(result), title=f"Fit: {fit_label(result)}", timeout=12)

    def on_fit_failed(self, message: FitFailed) -> None:
        message.stop()
        self.notify(message.reason, title="Cannot fit", severity="error", timeout=8)
