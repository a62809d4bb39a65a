"""F4 from the main screen: an edited preset runs as it is on screen, a stale edit's name says how to save it,
a start error stops the progress bar, and a loaded chat model is unloaded first unless the user keeps both."""

from dataclasses import replace

from fakes import make_app, wait_until
from textual.widgets import ProgressBar, Static

from workbench.core.config.preset import Preset
from workbench.ui.engine_session import IDLE, LOADED
from workbench.ui.messages import BenchSweepFailed
from workbench.ui.screens.bench_screen import BenchScreen
from workbench.ui.screens.confirm_modal import ConfirmModal


def status(screen) -> str:
    return str(screen.query_one("#bench-status", Static).render())


def no_sweep(monkeypatch) -> list:
    started = []
    monkeypatch.setattr(BenchScreen, "run_sweep", lambda self: started.append(self.presets))
    return started


async def open_bench(pilot) -> BenchScreen:
    await pilot.press("f4")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, BenchScreen) and pilot.app.screen.is_mounted)
    await pilot.pause()
    return pilot.app.screen


async def load_then_f4(pilot):
    """Load the chat model, press F4: the bench asks about the loaded engine first."""
    main = pilot.app.main_screen
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: main.phase == LOADED)
    await pilot.press("f4")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmModal))
    return main


async def test_an_edited_preset_is_benched_as_it_is_on_screen(monkeypatch):
    started = no_sweep(monkeypatch)
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(120, 34)) as pilot:
        main = pilot.app.main_screen
        await pilot.pause()
        edited = replace(main.selection.preset(), ctx_size=1536, batch_size=64)
        main.choice_bar.use_unsaved(edited)
        label = main.selection.preset_name
        assert label.endswith("(unsaved)")
        bench = await open_bench(pilot)
        assert bench.query_one("#bench-presets").value.split(", ")[0] == label
        await pilot.click("#bench-start")
        await wait_until(pilot, lambda: started)
        first = started[0][0]
        # the edit itself, not a name the bench would look up among the files
        assert isinstance(first, Preset) and first.ctx_size == 1536 and first.batch_size == 64 and first.name == label
        assert started[0][1:] == ("quality-q8", "balanced-q4km")


async def test_a_stale_edit_name_says_how_to_save_it_and_a_start_error_stops_the_bar(monkeypatch):
    started = no_sweep(monkeypatch)
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        bench = await open_bench(pilot)
        bench.query_one("#bench-presets").value = "mine (unsaved)"
        await pilot.click("#bench-start")
        await wait_until(pilot, lambda: "save it in F3" in status(bench))
        assert started == []
        bench.query_one("#bench-presets").value = "as-is"
        bench.query_one("#bench-presets").focus()
        await pilot.press("enter")  # Enter in the form is Start (a second click within 0.2 s is one press)
        await wait_until(pilot, lambda: started)
        bar = bench.query_one("#bench-progress", ProgressBar)
        assert bar.total is None  # indeterminate while it starts
        bench.post_message(BenchSweepFailed("no-such-preset: unknown preset"))
        await wait_until(pilot, lambda: "could not run" in status(bench))
        assert bar.total is not None and bar.progress == 0  # stopped: no animating --%
        assert not bench.query_one("#bench-start").disabled


async def test_the_bench_unloads_the_chat_model_first_by_default(monkeypatch):
    no_sweep(monkeypatch)
    engines = []
    async with make_app(engines, device="jetson-orin-nano-8gb").run_test(size=(120, 34)) as pilot:
        main = await load_then_f4(pilot)
        body = str(pilot.app.screen.query_one(".dialog-body").content)
        assert "231 MiB" in body and "both are in memory" in body  # the fake engine's RSS: 231.0 MiB
        await pilot.press("enter")  # the focused default: Unload first
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, BenchScreen))
        await wait_until(pilot, lambda: main.phase == IDLE)
        assert "unload" in engines[0].calls
        assert "unloaded first" in status(pilot.app.screen)


async def test_keeping_both_engines_is_said_on_the_bench_screen(monkeypatch):
    no_sweep(monkeypatch)
    engines = []
    async with make_app(engines, device="jetson-orin-nano-8gb").run_test(size=(120, 34)) as pilot:
        main = await load_then_f4(pilot)
        await pilot.click("#confirm")  # Keep both loaded
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, BenchScreen))
        await pilot.pause()
        assert main.phase == LOADED and "unload" not in engines[0].calls
        assert "both engines are in memory" in status(pilot.app.screen)
