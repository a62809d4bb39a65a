"""`workbench` with no command: resolve what to preselect, then run the app."""

from __future__ import annotations

import argparse

from workbench.core.config.app_settings import load_settings
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset
from workbench.core.config.rpc_endpoints import parse_rpc_option
from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import BUNDLED, resolve_model
from workbench.ui.collector import pace_collector
from workbench.ui.remembered import SettingsKeeper, apply_remembered
from workbench.ui.selection import DEFAULT_DEVICE, DEFAULT_PRESET, Selection


def build_selection(args: argparse.Namespace):
    """The startup choice: --model (default the bundled model), --preset, --device (default host)."""
    bundled = None
    try:
        bundled = resolve_model(BUNDLED)
    except Exception:
        if not getattr(args, "model", None):
            raise  # no model at all: the one-line error says how to install the bundled one
    model = resolve_model(args.model) if getattr(args, "model", None) else bundled
    selection = Selection(model_path=model, preset_name=getattr(args, "preset", None) or DEFAULT_PRESET,
                          device_name=getattr(args, "device", None) or DEFAULT_DEVICE)
    if getattr(args, "rpc", ""):
        selection.rpc = parse_rpc_option(args.rpc)
    if bundled is not None:
        selection.add_model(bundled, f"{bundled.stem} (bundled)")
    selection.add_model(model)
    return selection


def check_theme(name: str) -> None:
    """An unknown --theme is one line naming the themes there are."""
    from textual.theme import BUILTIN_THEMES  # deferred: textual, once the arguments are checked

    from workbench.ui.themes import load_themes  # deferred: textual, once the arguments are checked

    names = [theme.name for theme in load_themes()] + sorted(BUILTIN_THEMES)
    if name not in names:
        raise WorkbenchError(f"unknown theme {name!r}", where="--theme", fix=f"Use one of: {', '.join(names)}")


def build_app(args: argparse.Namespace, **app_options):
    """The app as `workbench` starts it: remembered settings fill what the command line leaves out."""
    loaded = load_settings()
    notes = [loaded.problem, *apply_remembered(args, loaded.settings)]
    if getattr(args, "theme", None) and args.theme == loaded.settings.theme:
        try:
            check_theme(args.theme)
        except WorkbenchError as error:
            notes.append(f"the last theme is not usable ({error.what})")
            args.theme = None
    check_arguments(args)
    selection = build_selection(args)
    from workbench.ui.app import WorkbenchApp  # deferred: textual, once the arguments are checked

    return WorkbenchApp(selection, theme_name=getattr(args, "theme", None), keeper=SettingsKeeper(loaded.settings),
                        startup_notes=tuple(notes), **app_options)


def check_arguments(args: argparse.Namespace) -> None:
    # A preset or device named on the command line is checked here, so a typo is one line on
    # stderr before the screen opens rather than a notification inside it.
    if getattr(args, "preset", None):
        load_preset(args.preset)
    if getattr(args, "device", None):
        load_device(args.device)
    if getattr(args, "theme", None):
        check_theme(args.theme)


def run_app(args: argparse.Namespace) -> int:
    app = build_app(args)
    pace_collector()
    app.run()
    return int(app.return_code or 0)
