"""The model and preset screens, the theme switch, and how `workbench` starts the app."""

import argparse

import pytest
from fakes import Held, handled, make_app, rendered, wait_until
from gguf_factory import write_tiny_gguf

from workbench.core.errors import WorkbenchError
from workbench.core.paths import bundled_model_path
from workbench.ui.messages import ModelsFound
from workbench.ui.run import build_selection, check_theme, run_app
from workbench.ui.screens import model_screen
from workbench.ui.widgets.kv_panel import KvPanel


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))


async def test_model_screen_scans_folders_inspects_and_selects(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    tiny = write_tiny_gguf(folder / "tiny.gguf")
    (folder / "broken.gguf").write_bytes(b"GGML not a gguf file at all")
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48)) as pilot:
        main = pilot.app.main_screen
        await pilot.press("f2")
        await wait_until(pilot, lambda: pilot.app.screen.query("#model-list"))
        models = pilot.app.screen
        models.query_one("#folders").value = str(folder)
        await pilot.click("#scan")
        await wait_until(pilot, lambda: str(tiny) in models.entries)
        assert str(bundled_model_path()) in models.entries and str(folder / "broken.gguf") in models.entries
        option_list = models.query_one("#model-list")
        option_list.highlighted = list(models.entries).index(str(folder / "broken.gguf"))
        await wait_until(pilot, lambda: "Cannot use this file" in str(models.query_one("#inspect-summary").content))
        assert models.query_one("#use-model").disabled
        option_list.highlighted = list(models.entries).index(str(tiny))
        await wait_until(pilot, lambda: not models.query_one("#use-model").disabled)
        await pilot.click("#use-model")
        await wait_until(pilot, lambda: pilot.app.screen is main)
        assert main.selection.model_path == tiny
        assert main.query_one("#model-select").value == str(tiny)
        await wait_until(pilot, lambda: main.ledger is not None and main.ledger.model == "tiny-test-llama")
    assert (tmp_path / "config" / "model_folders.txt").read_text() == f"{folder}\n"


async def test_preset_screen_validates_saves_copies_and_uses(tmp_path):
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48)) as pilot:
        main = pilot.app.main_screen
        await pilot.press("f3")
        await wait_until(pilot, lambda: pilot.app.screen.query("#preset-list"))
        presets = pilot.app.screen
        await wait_until(pilot, lambda: presets.query_one("#field-name").value == "as-is")
        assert {"as-is", "balanced-q4km", "quality-q8"} <= set(presets.presets)
        # the ledger under the form comes from a worker: wait for it, not for a moment
        await wait_until(pilot, lambda: "verdict" in rendered(presets.query_one("#preset-ledger")))
        assert "fits" in rendered(presets.query_one("#preset-ledger"))

        def problems() -> str:
            return str(presets.query_one("#preset-problems").content)

        # each check runs when the field's Changed message reaches the screen: wait for it, not for a moment
        presets.query_one("#field-ctx_size").value = "lots"
        await wait_until(pilot, lambda: "ctx_size" in problems() and presets.query_one("#save-preset").disabled)
        presets.query_one("#field-ctx_size").value = "4096"
        presets.query_one("#field-cache_type_v").value = "q8_0"
        await wait_until(pilot, lambda: "needs flash_attn = true" in problems())
        presets.query_one("#field-flash_attn").value = True
        presets.query_one("#field-name").value = "field-test"
        await wait_until(pilot, lambda: "✔ valid preset" in problems() and presets.edited.name == "field-test")
        assert "-c 4096" in str(presets.query_one("#server-command").content)
        await pilot.press("ctrl+y")
        assert pilot.app.clipboard.startswith("llama-server -m ") and "-ctv q8_0" in pilot.app.clipboard
        await pilot.press("ctrl+s")
        saved = tmp_path / "config" / "presets" / "field-test.toml"
        await wait_until(pilot, saved.exists)
        assert "ctx_size = 4096" in saved.read_text()
        await wait_until(pilot, lambda: "field-test" in presets.presets)
        await pilot.click("#use-preset")
        await wait_until(pilot, lambda: pilot.app.screen is main)
        await wait_until(pilot, lambda: main.ledger is not None and main.ledger.preset == "field-test")
        assert main.query_one("#preset-select").value == "field-test"
        assert main.ledger.ctx_size == 4096 and main.ledger.cache_type_v == "q8_0"


async def test_theme_switch_restyles_the_screen_and_the_panels():
    async with make_app().run_test(size=(160, 48)) as pilot:
        assert pilot.app.theme == "workbench-dark"
        kv = pilot.app.main_screen.query_one(KvPanel)
        dark_background = kv.styles.background
        dark_kv_system = pilot.app.theme_variables["kv-system"]
        pilot.app.theme = "projector-light"
        await pilot.pause()
        assert kv.styles.background != dark_background
        assert pilot.app.theme_variables["kv-system"] != dark_kv_system
        assert pilot.app.current_theme.dark is False


def test_startup_selection_defaults_and_command_line_choices(tmp_path):
    default = build_selection(argparse.Namespace(model=None, preset=None, device=None))
    assert (default.model_path, default.preset_name, default.device_name) == (bundled_model_path(), "as-is", "host")
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    chosen = build_selection(argparse.Namespace(model=str(tiny), preset="quality-q8", device="rk3588-8gb"))
    assert (chosen.model_path, chosen.preset_name, chosen.device_name) == (tiny, "quality-q8", "rk3588-8gb")
    assert list(chosen.models) == [str(bundled_model_path()), str(tiny)]  # the bundled one stays on offer


@pytest.mark.parametrize("option, value, named", [
    ("preset", "no-such-preset", "no-such-preset"),
    ("device", "no-such-board", "no-such-board"),
    ("model", "/nowhere/model.gguf", "/nowhere/model.gguf"),
    ("theme", "no-such-theme", "no-such-theme"),
])
def test_bad_command_line_choice_is_one_line_before_the_app_opens(option, value, named):
    args = argparse.Namespace(model=None, preset=None, device=None, theme=None)
    setattr(args, option, value)
    with pytest.raises(WorkbenchError) as caught:
        run_app(args)
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_every_shipped_theme_is_accepted_on_the_command_line_and_starts_the_app_in_it():
    from workbench.ui.themes import load_themes

    shipped = {theme.name for theme in load_themes()}
    assert {"workbench-dark", "projector-light", "amber-field"} <= shipped  # a lost theme file fails here
    for name in (*sorted(shipped), "textual-dark"):
        check_theme(name)
        app = make_app(theme_name=name)
        assert app.theme == name and app.startup_problems == []
    with pytest.raises(WorkbenchError) as caught:
        check_theme("no-such-theme")
    assert all(name in str(caught.value) for name in shipped)  # the error names the themes there are


async def test_f4_opens_the_bench_screen_for_the_chosen_model_device_and_preset(monkeypatch):
    from workbench.ui.screens.bench_screen import BenchScreen

    started = []
    monkeypatch.setattr(BenchScreen, "run_sweep", lambda self: started.append(True))  # the bench's own test runs it
    async with make_app(preset="long-context-kv4", device="rk3588-8gb").run_test(size=(160, 48)) as pilot:
        await pilot.press("f4")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, BenchScreen))
        bench = pilot.app.screen
        assert bench.model_path == bundled_model_path() and bench.device == "rk3588-8gb"
        assert bench.presets[0] == "long-context-kv4" and len(set(bench.presets)) == len(bench.presets)
        await pilot.pause(0.5)
        assert started == []  # F4 opens on the settings form: nothing runs before Start
        await pilot.click("#bench-start")
        await wait_until(pilot, lambda: started == [True])  # Start runs when Button.Pressed reaches the screen


async def test_a_scan_that_ends_after_a_later_one_does_not_replace_its_list(tmp_path, monkeypatch):
    """The first folder's scan is held in its thread until the second folder's list is shown, then let go."""
    slow, fast = tmp_path / "slow", tmp_path / "fast"
    slow.mkdir(), fast.mkdir()
    slow_model, fast_model = write_tiny_gguf(slow / "slow.gguf"), write_tiny_gguf(fast / "fast.gguf")
    scan = Held.patched(monkeypatch, model_screen, "find_models", lambda folders: slow in folders)
    arrived: list = []
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48), message_hook=arrived.append) as pilot:
        await pilot.press("f2")
        await wait_until(pilot, lambda: pilot.app.screen.query("#model-list"))
        models = pilot.app.screen
        folders = models.query_one("#folders")
        folders.focus()
        for folder in (slow, fast):
            folders.value = str(folder)
            await pilot.press("enter")
            if folder is slow:
                await wait_until(pilot, scan.held.is_set, what="the first folder's scan held in its thread")
        await wait_until(pilot, lambda: str(fast_model) in models.entries)
        scan.release.set()
        await wait_until(pilot, lambda: any(isinstance(m, ModelsFound) and any(str(slow_model) == e[1] for e in m.entries)
                                            for m in arrived), 30, what="the held scan's list")
        await handled(pilot, models, arrived)
        assert str(fast_model) in models.entries and str(slow_model) not in models.entries


async def test_model_screen_opens_a_gguf_typed_by_its_path(tmp_path):
    tiny = write_tiny_gguf(tmp_path / "typed.gguf")
    (tmp_path / "notes.txt").write_text("not a model")
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(120, 34)) as pilot:
        main = pilot.app.main_screen
        await pilot.press("f2")
        await wait_until(pilot, lambda: pilot.app.screen.query("#model-list"))
        models = pilot.app.screen
        models.query_one("#folders").value = f"{tiny}:{tmp_path / 'notes.txt'}:{tmp_path / 'gone.gguf'}"
        models.query_one("#folders").focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: str(tiny) in models.entries)
        problems = str(models.query_one("#model-problems").content)
        assert "notes.txt: a file, not a folder or a .gguf model" in problems and "gone.gguf: no such file" in problems
        await wait_until(pilot, lambda: models.highlighted == str(tiny) and not models.query_one("#use-model").disabled)
        await pilot.click("#use-model")
        await wait_until(pilot, lambda: pilot.app.screen is main)
        assert main.selection.model_path == tiny


def test_the_app_runs_with_the_collector_paced(monkeypatch):
    import gc

    from workbench.ui.app import WorkbenchApp
    from workbench.ui.collector import YOUNG_THRESHOLD, pace_collector

    seen = {}
    monkeypatch.setattr(WorkbenchApp, "run", lambda self: seen.update(young=gc.get_threshold()[0],
                                                                      frozen=gc.get_freeze_count()))
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)  # Python's own pace
    try:
        assert run_app(argparse.Namespace(model=None, preset=None, device=None, theme=None)) == 0
    finally:
        pace_collector()  # as the suite runs (conftest)
    # what the imports made is frozen (some hundred thousand objects), young objects wait for 5,000
    assert seen["young"] == YOUNG_THRESHOLD and seen["frozen"] > 50_000, seen
