"""How the main screen opens the other screens (models, presets, serve, bench) and takes their answers."""

from __future__ import annotations

from pathlib import Path

from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.units import mib
from workbench.ui.engine_session import Phase
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.model_screen import ModelScreen
from workbench.ui.screens.preset_screen import PresetScreen, UnsavedPreset
from workbench.ui.screens.serve_screen import ServeController, ServeScreen

BENCH_DEFAULT_PRESETS = ("quality-q8", "balanced-q4km")  # what the bench compares the current preset with


def open_models(screen) -> None:
    def chosen(result) -> None:
        if result is not None:
            path, label = result
            screen.select_model(Path(path), label)

    # installed, not pushed fresh: a hub download keeps running while the user chats
    if not screen.app.is_screen_installed("models"):
        screen.app.install_screen(ModelScreen(screen.selection), "models")
    screen.app.push_screen("models", chosen)


def open_presets(screen) -> None:
    def chosen(result: str | UnsavedPreset | None) -> None:
        if isinstance(result, UnsavedPreset):
            screen.choice_bar.use_unsaved(result.preset, result.label)
            return
        # back without choosing still re-reads the list: a save or a revert changes what a name means
        screen.select_preset(result or screen.selection.preset_name)

    screen.app.push_screen(PresetScreen(screen.selection), chosen)


def open_serve(screen) -> None:
    """The Serve screen: the loaded model over the OpenAI-compatible API, served as `workbench api` serves it
    (the loaded preset and device given: a crash restarts the engine with them; /metrics has the telemetry)."""
    engine = screen.session.engine if screen.phase == Phase.LOADED else None
    preset = device = None
    loaded = screen.session.choice.loaded
    if engine is not None and loaded is not None:
        try:
            _, preset, device = screen.selection.resolve(loaded)
        except Exception:  # noqa: BLE001 - served without restarts, as before; the choice names what it can
            preset = device = None
    ledger = screen.ledger
    controller = ServeController(engine, preset, device, allow_overbudget=ledger is not None and ledger.verdict
                                 == DOES_NOT_FIT, sampler_factory=screen.sampler_factory)
    kv = screen.panels.kv
    screen.app.push_screen(ServeScreen(engine, kv.bytes_per_token, kv.cache_types, controller=controller))


def bench_presets(selection) -> tuple:
    """The current preset against the bench's defaults; an edit used without saving goes as the Preset itself
    (its label, e.g. "as-is (edited)", names no file the bench could load)."""
    current = selection.preset_name
    first = selection.unsaved_presets.get(current) or current
    return (first, *(name for name in BENCH_DEFAULT_PRESETS if name != current))


def open_bench(screen) -> None:
    """F4. With a model loaded for the chat, ask first: unload it (the default), or keep both engines loaded."""
    try:
        from workbench.ui.screens.bench_screen import BenchScreen  # deferred: plotext, when first opened
    except ImportError:
        screen.notify("The bench screen is not part of this build; use `workbench bench`.",
                      title="Bench", severity="warning")
        return
    selection = screen.selection

    def push(note: str) -> None:
        screen.app.push_screen(BenchScreen(selection.model_path, selection.device_name, bench_presets(selection),
                                           unsaved=dict(selection.unsaved_presets), note=note))

    loaded = screen.session.loaded
    if screen.phase not in (Phase.LOADED, Phase.GENERATING) or loaded is None:
        push("")
        return
    held = mib(loaded.rss_bytes) if loaded.rss_bytes else "its memory"

    def answered(keep_both: bool | None) -> None:
        if keep_both:
            push(f"The chat model stays loaded ({held} in its engine): both engines are in memory, so the sweep's "
                 "memory and speed figures include that pressure.")
            return
        screen.unload()
        push("The chat model was unloaded first: the sweep has the memory to itself (Ctrl+L loads it again).")

    screen.app.push_screen(ConfirmModal(
        "Unload the chat model before the bench?",
        f"The bench loads every preset in an engine of its own. The chat model's engine holds {held}; kept "
        "loaded, both are in memory at once: on a small board that risks swapping or the OOM killer, and the "
        "sweep's memory and speed figures are skewed by the other engine.",
        "Keep both loaded", back_label="Unload first"), answered)
