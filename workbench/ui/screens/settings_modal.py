"""Edit the system prompt and the sampling settings; bad numbers are named before applying."""

from __future__ import annotations

import dataclasses

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.widgets import Button, Input, Label, Static, TextArea

from workbench.core.engine.events import Sampling
from workbench.ui.screens.dialog_screen import DialogScreen

# field -> (type, lowest, highest): the ranges llama.cpp's samplers make sense in
SAMPLING_LIMITS: dict[str, tuple[type, float, float]] = {
    "temperature": (float, 0.0, 5.0),
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

    def __init__(self, system_prompt: str, sampling: Sampling) -> None:
        super().__init__()
        self.system_prompt, self.sampling = system_prompt, sampling

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static("System prompt and sampling", classes="dialog-title")
            yield TextArea(self.system_prompt, id="system-prompt", soft_wrap=True)
            with Grid(id="sampling-form"):
                for field in dataclasses.fields(Sampling):
                    yield Label(field.name.replace("_", " "))
                    yield Input(str(getattr(self.sampling, field.name)), id=f"sampling-{field.name}")
            yield Static("", id="settings-problems", classes="problems")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Apply", id="apply", variant="primary")

    def values(self) -> dict[str, str]:
        return {name: self.query_one(f"#sampling-{name}", Input).value for name in SAMPLING_LIMITS}

    def on_input_changed(self, _event: Input.Changed) -> None:
        _, problems = parse_sampling(self.values())
        self.query_one("#settings-problems", Static).update("\n".join(problems))
        self.query_one("#apply", Button).disabled = bool(problems)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        sampling, problems = parse_sampling(self.values())
        if sampling is None:
            self.query_one("#settings-problems", Static).update("\n".join(problems))
            return
        self.dismiss((self.query_one("#system-prompt", TextArea).text, sampling))
