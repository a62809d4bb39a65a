"""The app's remembered settings: applied at start where the command line says nothing, saved as they change."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from workbench.core.config.app_settings import CHAT_SHARE_RANGE, AppSettings, save_settings
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset
from workbench.core.errors import WorkbenchError
from workbench.ui.loaded_choice import Choice


def apply_remembered(args: argparse.Namespace, settings: AppSettings) -> list[str]:
    """Fill --model, --preset, --device and --theme the user did not give from `settings`; one line per
    remembered value that no longer works (a deleted model, a removed preset), which is then not used."""
    notes = []
    if settings.model and not getattr(args, "model", None):
        if Path(settings.model).is_file():
            args.model = settings.model
        else:
            notes.append(f"the last model {settings.model} is gone; the bundled model is chosen")
    for key, load in (("preset", load_preset), ("device", load_device)):
        value = getattr(settings, key)
        if value and not getattr(args, key, None):
            try:
                load(value)
            except WorkbenchError as error:
                notes.append(f"the last {key} {value!r} is not usable ({error.what}); the default is chosen")
            else:
                setattr(args, key, value)
    if settings.theme and not getattr(args, "theme", None):
        args.theme = settings.theme
    return notes


class SettingsKeeper:
    """Holds what is remembered and writes it whole at each change; a failure to write is said once."""

    def __init__(self, settings: AppSettings, path: Path | None = None) -> None:
        self.settings = settings
        self.path = path
        self.failed = False

    def remember_choice(self, choice: Choice, unsaved_presets: tuple[str, ...] = ()) -> str:
        preset = self.settings.preset if choice.preset_name in unsaved_presets else choice.preset_name
        return self._save(replace(self.settings, model=choice.model_path, preset=preset, device=choice.device_name))

    def remember_theme(self, name: str) -> str:
        return self._save(replace(self.settings, theme=name))

    def remember_chat_share(self, percent: int) -> str:
        low, high = CHAT_SHARE_RANGE
        return self._save(replace(self.settings, chat_share=max(low, min(high, percent))))

    def save_prompt(self, name: str, text: str) -> str:
        """Save a system-prompt preset; raises WorkbenchError for a bad name or text (nothing saved)."""
        return self._save(self.settings.with_prompt(name, text))

    def delete_prompt(self, name: str) -> str:
        return self._save(self.settings.without_prompt(name))

    def _save(self, settings: AppSettings) -> str:
        if settings == self.settings:
            return ""
        self.settings = settings
        problem = save_settings(settings, self.path)
        if problem and not self.failed:
            self.failed = True
            return problem
        return ""
