"""Edit the system prompt and the sampling settings; bad numbers are named before applying.

Saved system prompts (the settings file's presets) are picked from a list above the prompt,
and the prompt being edited is saved under a name with Save prompt (the app writes it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from workbench.core.config.app_settings import load_settings, prompt_name_problem
from workbench.core.config.limits import TEMPERATURE_MAX, TEMPERATURE_MIN
from workbench.core.engine.events import Sampling
from workbench.ui.screens.dialog_screen import DialogScreen

# field -> (type, lowest, highest): the ranges llama.cpp's samplers make sense in
SAMPLING_LIMITS: dict[str, tuple[type, float, float]] = {
    "temperature": (float, TEMPERATURE_MIN, TEMPERATURE_MAX),  # config/limits.py, as the API and the CLI
    "top_p": (float, 0.0, 1.0),
    "top_k": (int, 0, 1000),
    "min_p": (float, 0.0, 1.0),
    "repeat_penalty": (float, 0.5, 3.0),
    "seed": (int, -1, 2**31 - 1),
    "max_tokens": (int, 1, 32768),
}


def parse_sampling(values: dict[str, str]) -> tuple[Sampling | None, list[str]]:
    """A Sampling from the form's text, or the list of problems (one line each)."""
    parsed, problems = {}, []
    for name, (kind, low, high) in SAMPLING_LIMITS.items():
        text = values.get(name, "").strip()
        try:
            value = kind(text)
        except ValueError:
            problems.append(f"{name}: {text!r} is not {'an integer' if kind is int else 'a number'}")
            continue
        if not low <= value <= high:
            problems.append(f"{name}: {value} is outside {low}–{high}")
            continue
        parsed[name] = value
    return (Sampling(**parsed), []) if not problems else (None, problems)


class SettingsModal(DialogScreen[tuple[str, Sampling] | None]):
    """Dismisses with (system prompt, Sampling) on Apply, None on Cancel."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    @dataclass
    class PromptSaved(Message):
        """The user saved the prompt being edited as a system-prompt preset (the app remembers it)."""

        name: str
        text: str

    def __init__(self, system_prompt: str, sampling: Sampling, prompts: tuple[tuple[str, str], ...] | None = None) -> None:
        super().__init__()
        self.system_prompt, self.sampling = system_prompt, sampling
        self.prompts = dict(load_settings().settings.system_prompts if prompts is None else prompts)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static("System prompt and sampling", classes="dialog-title")
            with Horizontal(id="prompt-presets"):
                yield Select(self._prompt_options(), id="prompt-preset", prompt="Saved prompts")
                yield Input("", id="prompt-name", placeholder="name to save it as")
                yield Button("Save prompt", id="save-prompt")
            yield TextArea(self.system_prompt, id="system-prompt", soft_wrap=True)
            with Grid(id="sampling-form"):
                for field in dataclasses.fields(Sampling):
                    yield Label(field.name.replace("_", " "))
                    yield Input(str(getattr(self.sampling, field.name)), id=f"sampling-{field.name}")
            yield Static("", id="settings-problems", classes="problems")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Apply", id="apply", variant="primary")

    def _prompt_options(self) -> list[tuple[str, str]]:
        return [(name, name) for name in self.prompts]

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "prompt-preset" and isinstance(event.value, str) and event.value in self.prompts:
            self.query_one("#system-prompt", TextArea).text = self.prompts[event.value]
            self.query_one("#prompt-name", Input).value = event.value

    def save_prompt(self) -> None:
        name = self.query_one("#prompt-name", Input).value.strip()
        text = self.query_one("#system-prompt", TextArea).text
        problem = prompt_name_problem(name)
        if problem:
            self.query_one("#settings-problems", Static).update(f"prompt name: {problem}")
            return
        self.prompts[name] = text
        self.query_one("#prompt-preset", Select).set_options(self._prompt_options())
        self.post_message(self.PromptSaved(name, text))
        self.notify(f"System prompt saved as {name!r}.", title="Settings")

    def values(self) -> dict[str, str]:
        return {name: self.query_one(f"#sampling-{name}", Input).value for name in SAMPLING_LIMITS}

    def on_input_changed(self, _event: Input.Changed) -> None:
        _, problems = parse_sampling(self.values())
        self.query_one("#settings-problems", Static).update("\n".join(problems))
        self.query_one("#apply", Button).disabled = bool(problems)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save-prompt":
            self.save_prompt()
            return
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        sampling, problems = parse_sampling(self.values())
        if sampling is None:
            self.query_one("#settings-problems", Static).update("\n".join(problems))
            return
        self.dismiss((self.query_one("#system-prompt", TextArea).text, sampling))
