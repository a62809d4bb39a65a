"""Presets: browse shipped and user ones, see the ledger, edit with live checks, save, copy flags."""

from __future__ import annotations

import dataclasses

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Label, OptionList, Select, Static, Switch
from textual.widgets.option_list import Option

from workbench.core.preset import Preset
from workbench.ui.selection import Selection
from workbench.ui.units import mib

TEXT_FIELDS = ("name", "description", "weights")
INT_FIELDS = ("ctx_size", "batch_size", "ubatch_size", "threads", "draft_prompt_lookup")
BOOL_FIELDS = ("flash_attn", "mlock", "mmap")
CACHE_FIELDS = ("cache_type_k", "cache_type_v")
EDITOR_SOURCE = "preset editor"


def form_mapping(texts: dict[str, str], flags: dict[str, bool], caches: dict[str, str]) -> dict:
    """The editor's values as a TOML file would hold them; non-numbers stay text so the check names them."""
    data: dict = {name: texts[name] for name in TEXT_FIELDS}
    for name in INT_FIELDS:
        text = texts[name].strip()
        try:
            data[name] = int(text)
        except ValueError:
            data[name] = text
    return data | flags | caches


def ledger_table(ledger) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, n_bytes in (("weights", ledger.weights_bytes), ("KV cache", ledger.kv_bytes),
                           ("compute", ledger.compute_bytes), ("overhead", ledger.overhead_bytes),
                           ("total", ledger.total_bytes), ("left for the LLM", ledger.budget_bytes),
                           ("headroom", ledger.headroom_bytes)):
        table.add_row(label, mib(n_bytes))
    table.add_row("verdict", Text(f"{ledger.verdict}: {ledger.reason}"))
    return table


class PresetScreen(Screen[str | None]):
    """Dismisses with the name of the preset to use, or None."""

    CSS_PATH = "preset_screen.tcss"
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back"),
        Binding("ctrl+s", "save_preset", "Save as user preset"),
        Binding("ctrl+y", "copy_command", "Copy llama-server command"),
        Binding("ctrl+u", "use_preset", "Use preset"),
    ]

    def __init__(self, selection: Selection) -> None:
        super().__init__()
        self.selection = selection
        self.presets: dict[str, Preset] = {}
        self.edited: Preset | None = None  # the form's preset when it passes the checks

    def compose(self) -> ComposeResult:
        from workbench.core.ggml_types import CACHE_TYPES

        yield Header()
        with Horizontal():
            with Vertical(id="preset-list-pane"):
                yield OptionList(id="preset-list")
            with VerticalScroll(id="preset-editor"):
                with Grid(id="preset-form"):
                    for name in TEXT_FIELDS + INT_FIELDS:
                        yield Label(name)
                        yield Input(id=f"field-{name}")
                    for name in CACHE_FIELDS:
                        yield Label(name)
                        yield Select([(t, t) for t in CACHE_TYPES], id=f"field-{name}", allow_blank=False)
                    for name in BOOL_FIELDS:
                        yield Label(name)
                        yield Switch(id=f"field-{name}")
                yield Static("", id="preset-problems")
                yield Static("", id="preset-ledger")
                yield Static("", id="server-command")
                with Horizontal(id="preset-buttons"):
                    yield Button("Use preset", id="use-preset", variant="primary")
                    yield Button("Save as user preset", id="save-preset")
                    yield Button("Copy llama-server command", id="copy-command")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Presets"
        self.reload_list(select=self.selection.preset_name)

    def reload_list(self, select: str | None = None) -> None:
        from workbench.core.presets import list_presets, preset_origin

        option_list = self.query_one("#preset-list", OptionList)
        option_list.clear_options()
        try:
            presets = list_presets()
        except Exception as error:
            self.notify(str(error), title="Presets", severity="error", timeout=10)
            presets = ()
        self.presets = {preset.name: preset for preset in presets}
        for preset in presets:
            option_list.add_option(Option(Text.assemble(preset.name, (f"\u00a0\u00a0{preset_origin(preset)}", "dim")),
                                          id=preset.name))
        names = list(self.presets)
        if names:
            option_list.highlighted = names.index(select) if select in names else 0
        option_list.focus()

    @on(OptionList.OptionHighlighted, "#preset-list")
    def _preset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.fill_form(self.presets[event.option.id])

    def fill_form(self, preset: Preset) -> None:
        with self.prevent(Input.Changed, Switch.Changed, Select.Changed):
            for name in TEXT_FIELDS + INT_FIELDS:
                self.query_one(f"#field-{name}", Input).value = str(getattr(preset, name))
            for name in CACHE_FIELDS:
                self.query_one(f"#field-{name}", Select).value = getattr(preset, name)
            for name in BOOL_FIELDS:
                self.query_one(f"#field-{name}", Switch).value = getattr(preset, name)
        self.validate_form()

    @on(Input.Changed)
    @on(Switch.Changed)
    @on(Select.Changed)
    def validate_form(self) -> None:
        """Check the form as a preset file is checked, then against the model and the device."""
        from workbench.core.ledger import predict_ledger
        from workbench.core.presets import llama_server_command, preset_from_mapping, preset_problems

        problems = self.query_one("#preset-problems", Static)
        colours = self.app.theme_variables  # the theme's, so every theme restyles the checks
        error_style, warning_style = f"bold {colours['text-error']}", colours["text-warning"]
        data = form_mapping(
            {name: self.query_one(f"#field-{name}", Input).value for name in TEXT_FIELDS + INT_FIELDS},
            {name: self.query_one(f"#field-{name}", Switch).value for name in BOOL_FIELDS},
            {name: str(self.query_one(f"#field-{name}", Select).value) for name in CACHE_FIELDS},
        )
        try:
            preset = preset_from_mapping(data, source=EDITOR_SOURCE)
        except Exception as error:
            self.edited = None
            problems.update(Text(f"✘ {error}", style=error_style))
            self._set_actions_enabled(False)
            return
        self.edited = preset
        self._set_actions_enabled(True)
        lines = Text()
        try:
            model, device = self.selection.model_info(), self.selection.device()
            for problem in preset_problems(preset, model):
                mark = "✘" if problem.level == "error" else "⚠"
                lines.append(f"{mark} {problem.message}. {problem.fix}\n",
                             style=error_style if problem.level == "error" else warning_style)
            self.query_one("#preset-ledger", Static).update(ledger_table(predict_ledger(model, preset, device)))
            self.query_one("#server-command", Static).update(
                Text(llama_server_command(preset, self.selection.model_path), style="bold"))
        except Exception as error:
            lines.append(f"✘ cannot predict for {self.selection.model_path.name}: {error}\n", style=error_style)
        problems.update(lines or Text("✔ valid preset", style=colours["text-success"]))

    def _set_actions_enabled(self, enabled: bool) -> None:
        for button_id in ("use-preset", "save-preset", "copy-command"):
            self.query_one(f"#{button_id}", Button).disabled = not enabled

    @on(Button.Pressed, "#save-preset")
    def action_save_preset(self) -> None:
        from workbench.core.presets import save_user_preset

        if self.edited is None:
            self.notify("Fix the preset first.", severity="warning")
            return
        try:
            path = save_user_preset(dataclasses.replace(self.edited, source=""))
        except Exception as error:
            self.notify(str(error), title="Not saved", severity="error", timeout=10)
            return
        self.notify(str(path), title=f"Saved user preset {self.edited.name}")
        self.reload_list(select=self.edited.name)

    @on(Button.Pressed, "#copy-command")
    def action_copy_command(self) -> None:
        from workbench.core.presets import llama_server_command

        if self.edited is None:
            return
        command = llama_server_command(self.edited, self.selection.model_path)
        self.app.copy_to_clipboard(command)
        self.notify(command, title="Copied llama-server command", timeout=10)

    @on(Button.Pressed, "#use-preset")
    def action_use_preset(self) -> None:
        """Use the highlighted preset; an edited one must be saved first to have a name to load."""
        if self.edited is None:
            return
        saved = self.presets.get(self.edited.name)
        if saved is None or dataclasses.replace(saved, source="") != dataclasses.replace(self.edited, source=""):
            self.action_save_preset()
        self.dismiss(self.edited.name)
