"""Presets: browse shipped and user ones, see the ledger, edit with live checks, save, copy flags."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import (
    Button,
    Footer,
    Header,
    Input,
    Label,
    OptionList,
    Select,
    Static,
    Switch,
)
from textual.widgets.option_list import Option

from workbench.core.config.cpu_topology import format_cpu_list
from workbench.core.config.preset import Preset
from workbench.core.config.presets import (
    llama_server_command,
    preset_catalog,
    preset_from_mapping,
    preset_origin,
    preset_problems,
    preset_to_toml,
    revert_user_preset,
    save_user_preset,
    shadows_shipped,
    shipped_preset_names,
)
from workbench.core.gguf.ggml_types import CACHE_TYPES
from workbench.core.ledger.predict import predict_ledger
from workbench.core.units import mib
from workbench.ui.device_problems import device_problems
from workbench.ui.messages import PresetChecked
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.selection import Selection, unsaved_label
from workbench.ui.widgets.verdict_line import Prediction, VerdictLine, describe_in_figures

WIDE_MIN_SIZE = (120, 34)  # below this the form is one column of borderless fields
CHECK_DELAY_S = 0.25  # the ledger is predicted once typing pauses this long, not at every key

TEXT_FIELDS = ("name", "description", "weights", "chat_template", "cpu_cores")
INT_FIELDS = ("ctx_size", "batch_size", "ubatch_size", "threads", "parallel", "n_cpu_moe", "draft_prompt_lookup")
BOOL_FIELDS = ("flash_attn", "mlock", "mmap", "swa_full")
CACHE_FIELDS = ("cache_type_k", "cache_type_v")
EDITOR_SOURCE = "preset editor"


def form_mapping(texts: dict[str, str], flags: dict[str, bool], caches: dict[str, str],
                 underneath: Preset | None = None) -> dict:
    """The editor's values as a TOML file would hold them; non-numbers stay text so the check names them.
    The keys the form does not show (rpc, gpu_layers, tensor_split, special_tokens_in_messages, ...) are
    those of `underneath`, the preset being edited, so saving an edit keeps them; an empty cpu_cores
    leaves the key out (threads choose the cores)."""
    data: dict = tomllib.loads(preset_to_toml(underneath)) if underneath is not None else {}
    data |= {name: texts[name] for name in TEXT_FIELDS}
    if not data["cpu_cores"].strip():
        del data["cpu_cores"]
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


@dataclass(frozen=True)
class UnsavedPreset:
    """An edit to use for this session only, under `label`."""

    label: str
    preset: Preset


class PresetScreen(Screen[str | UnsavedPreset | None]):
    """Dismisses with the name of the saved preset to use, an `UnsavedPreset`, or None."""

    CSS_PATH = "preset_screen.tcss"
    # priority: a focused field's own keys (Ctrl+U erases an Input) must not swallow the screen's
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back"),
        Binding("ctrl+u", "use_preset", "Use", priority=True),
        Binding("ctrl+s", "save_preset", "Save", priority=True),
        Binding("ctrl+y", "copy_command", "Copy command", priority=True),
        Binding("ctrl+r", "revert_preset", "Revert", priority=True),
    ]

    def __init__(self, selection: Selection) -> None:
        super().__init__()
        self.selection = selection
        self.presets: dict[str, Preset] = {}
        self.edited: Preset | None = None  # the form's preset when it passes the checks
        self.highlighted: Preset | None = None  # the list's preset the form was filled from
        self._check_timer: Timer | None = None  # the pending check after a change
        self.verdict_line = VerdictLine(describe=describe_in_figures, verdict_id="preset-verdict", placeholder="",
                                        load_progress=False, id="preset-verdict-line")

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="preset-main"):
            with Vertical(id="preset-list-pane"):
                yield OptionList(id="preset-list")
            with Vertical(id="preset-right"):
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
                # always on screen, however small: what the form predicts and what can be done with it
                with Vertical(id="preset-actions"):
                    yield self.verdict_line
                    with Horizontal(id="preset-buttons"):
                        yield Button("Use", id="use-preset", variant="primary")
                        yield Button("Save", id="save-preset")
                        yield Button("Copy command", id="copy-command")
                        yield Button("Revert to shipped", id="revert-preset", variant="warning")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Presets"
        self._apply_size(self.app.size.width, self.app.size.height)
        chosen = self.selection.preset_name
        self.reload_list(select=chosen.split(" (")[0] if chosen in self.selection.unsaved_presets else chosen)

    def on_resize(self, event: Resize) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        compact = width < WIDE_MIN_SIZE[0] or height < WIDE_MIN_SIZE[1]
        self.set_class(compact, "-compact")
        for widget in self.query("#preset-form Input, #preset-form Select, #preset-buttons Button"):
            widget.compact = compact

    def reload_list(self, select: str | None = None) -> None:
        option_list = self.query_one("#preset-list", OptionList)
        option_list.clear_options()
        try:
            catalog = preset_catalog()
            presets = catalog.entries
            for broken in catalog.broken:  # named, and the other presets still listed
                self.notify(broken.line, title="Preset file not loaded", severity="warning", timeout=15)
        except Exception as error:
            self.notify(str(error), title="Presets", severity="error", timeout=10)
            presets = ()
        self.presets = {preset.name: preset for preset in presets}
        shipped = shipped_preset_names()
        for preset in presets:
            origin = preset_origin(preset)
            if origin == "user" and preset.name in shipped:
                origin = "user, replaces shipped"
            option_list.add_option(Option(Text.assemble(preset.name, (f"\u00a0\u00a0{origin}", "dim")),
                                          id=preset.name))
        names = list(self.presets)
        if names:
            option_list.highlighted = names.index(select) if select in names else 0
        option_list.focus()

    @on(OptionList.OptionHighlighted, "#preset-list")
    def _preset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.fill_form(self.presets[event.option.id])

    def fill_form(self, preset: Preset) -> None:
        """Show `preset` in the form and check it at once (typing is checked after a pause)."""
        self.highlighted = preset
        with self.prevent(Input.Changed, Switch.Changed, Select.Changed):
            for name in TEXT_FIELDS + INT_FIELDS:
                value = getattr(preset, name)
                text = format_cpu_list(value) if name == "cpu_cores" else str(value)
                self.query_one(f"#field-{name}", Input).value = text
            for name in CACHE_FIELDS:
                self.query_one(f"#field-{name}", Select).value = getattr(preset, name)
            for name in BOOL_FIELDS:
                self.query_one(f"#field-{name}", Switch).value = getattr(preset, name)
        self.validate_form(delay_s=0.0)

    @on(Input.Changed)
    @on(Switch.Changed)
    @on(Select.Changed)
    def _form_changed(self) -> None:
        self.validate_form()

    def validate_form(self, delay_s: float = CHECK_DELAY_S) -> None:
        """Check the form as a preset file is checked and show its llama-server command (both quick); the
        model and device checks and the ledger follow from a worker, `delay_s` after the last change."""
        problems = self.query_one("#preset-problems", Static)
        data = form_mapping(
            {name: self.query_one(f"#field-{name}", Input).value for name in TEXT_FIELDS + INT_FIELDS},
            {name: self.query_one(f"#field-{name}", Switch).value for name in BOOL_FIELDS},
            {name: str(self.query_one(f"#field-{name}", Select).value) for name in CACHE_FIELDS},
            self.highlighted,
        )
        self._set_revert_enabled()
        if self._check_timer is not None:
            self._check_timer.stop()
            self._check_timer = None
        try:
            preset = preset_from_mapping(data, source=EDITOR_SOURCE)
        except Exception as error:
            self.edited = None
            problems.update(Text(f"✘ {error}", style=f"bold {self.app.theme_variables['text-error']}"))
            self.verdict_line.prediction = Prediction(None, None, failure=str(error))
            self._set_actions_enabled(False)
            return
        self.edited = preset
        self._set_actions_enabled(True)
        self.query_one("#server-command", Static).update(
            Text(llama_server_command(preset, self.selection.model_path), style="bold"))
        check = partial(self.run_worker, partial(check_preset, self.selection, self.selection.model_path,
                                                   self.selection.device_name, preset, self.post_message),
                        thread=True, exclusive=True, group="preset-check")
        if delay_s > 0:
            self._check_timer = self.set_timer(delay_s, check)
        else:
            check()

    def on_preset_checked(self, message: PresetChecked) -> None:
        if message.preset is not self.edited:
            return  # the form changed since: its own check follows
        colours = self.app.theme_variables  # the theme's, so every theme restyles the checks
        error_style, warning_style = f"bold {colours['text-error']}", colours["text-warning"]
        lines = Text()
        for problem in message.problems:
            mark = "✘" if problem.level == "error" else "⚠"
            lines.append(f"{mark} {problem.message}. {problem.fix}\n",
                         style=error_style if problem.level == "error" else warning_style)
        if message.ledger is not None:
            self.query_one("#preset-ledger", Static).update(ledger_table(message.ledger))
        else:
            lines.append(f"✘ {message.failure}\n", style=error_style)
        self.verdict_line.prediction = Prediction(None, message.ledger, message.problems, message.failure,
                                                  note=self._edit_state())
        self.query_one("#preset-problems", Static).update(lines or Text("✔ valid preset", style=colours["text-success"]))

    def _edit_state(self) -> str:
        """"" when the form shows a saved preset unchanged, else a word saying it is not saved."""
        saved = self.presets.get(self.edited.name) if self.edited else None
        if saved is None:
            return "new, not saved"
        return "" if same_settings(saved, self.edited) else "edited, not saved"

    def _set_actions_enabled(self, enabled: bool) -> None:
        for button_id in ("use-preset", "save-preset", "copy-command"):
            self.query_one(f"#{button_id}", Button).disabled = not enabled

    def _set_revert_enabled(self) -> None:
        self.query_one("#revert-preset", Button).display = self._revertible() is not None

    def _revertible(self) -> str | None:
        """The highlighted preset's name when it is a user preset replacing a shipped one."""
        preset = self.highlighted
        return preset.name if preset is not None and shadows_shipped(preset.name) else None

    @on(Button.Pressed, "#save-preset")
    def action_save_preset(self) -> None:
        if self.edited is None:
            self.notify("Fix the preset first.", severity="warning")
            return
        edited = self.edited
        if edited.name not in shipped_preset_names():
            self._save(edited)
            return

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self._save(edited)

        self.app.push_screen(ConfirmModal(
            f"Replace the shipped preset {edited.name}?",
            f"A user preset named {edited.name} replaces the shipped one everywhere: in this app, in "
            f"`workbench presets`, in bench and chat. Revert brings the shipped one back (here, or "
            f"`workbench presets revert {edited.name}`). To keep both, give this one another name.",
            f"Save as {edited.name}"), answered)

    def _save(self, preset: Preset) -> None:
        try:
            path = save_user_preset(dataclasses.replace(preset, source=""))
        except Exception as error:
            self.notify(str(error), title="Not saved", severity="error", timeout=10)
            return
        note = " (replaces the shipped one until reverted)" if preset.name in shipped_preset_names() else ""
        self.notify(f"{path}{note}", title=f"Saved user preset {preset.name}")
        self.reload_list(select=preset.name)

    @on(Button.Pressed, "#revert-preset")
    def action_revert_preset(self) -> None:
        name = self._revertible()
        if name is None:
            self.notify("Only a user preset that replaces a shipped one can be reverted.", title="Revert",
                        severity="warning")
            return
        try:
            kept = revert_user_preset(name)
        except Exception as error:
            self.notify(str(error), title="Not reverted", severity="error", timeout=10)
            return
        self.notify(f"Your version is kept as {kept}.", title=f"Shipped {name} is back")
        self.reload_list(select=name)

    @on(Button.Pressed, "#copy-command")
    def action_copy_command(self) -> None:
        if self.edited is None:
            return
        command = llama_server_command(self.edited, self.selection.model_path)
        self.app.copy_to_clipboard(command)
        self.notify(command, title="Copied llama-server command", timeout=10)

    @on(Button.Pressed, "#use-preset")
    def action_use_preset(self) -> None:
        """Use the form's preset. A saved one by its name; an edit for this session only (never written)."""
        if self.edited is None:
            return
        saved = self.presets.get(self.edited.name)
        if saved is not None and same_settings(saved, self.edited):
            self.dismiss(self.edited.name)
            return
        label = unsaved_label(self.edited, set(self.presets))
        self.notify("Used for this session only; Save (Ctrl+S) keeps it.", title=label)
        self.dismiss(UnsavedPreset(label, self.edited))


def same_settings(a: Preset, b: Preset) -> bool:
    return dataclasses.replace(a, source="") == dataclasses.replace(b, source="")


def check_preset(selection: Selection, model_path: Path, device_name: str, preset: Preset,
                 post: Callable[[Message], object]) -> None:
    """Worker body: the preset's problems with the model and the device's with it, and its ledger on the device
    (`selection` resolves)."""
    try:
        model, device = selection.model_info(model_path), selection.device(device_name)
        problems = preset_problems(preset, model) + device_problems(preset, device)
        ledger = predict_ledger(model, preset, device)
    except Exception as error:
        post(PresetChecked(preset, failure=f"cannot predict for {model_path.name}: {error}"))
        return
    post(PresetChecked(preset, problems, ledger))
