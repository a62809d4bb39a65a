"""The Presets screen: using an edit never writes it, a shipped name asks first, a replacement reverts;
and the screen works at 80x24 (`workbench presets revert` is tested here too)."""

import tomllib

import pytest
from fakes import make_app, wait_until
from textual.widgets import Button, Input, OptionList, Select, Static, Switch

from workbench.cli.main import main
from workbench.core.config.presets import load_preset, preset_origin, save_user_preset
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.preset_screen import PresetScreen

DEVICE = "jetson-orin-nano-8gb"


@pytest.fixture(autouse=True)
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "config"


async def open_presets(pilot) -> PresetScreen:
    await pilot.press("f3")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, PresetScreen))
    presets = pilot.app.screen
    await wait_until(pilot, lambda: presets.query_one("#field-name", Input).value == "as-is")
    return presets


def listed_origin(presets: PresetScreen, name: str) -> str:
    option_list = presets.query_one("#preset-list", OptionList)
    return str(option_list.get_option(name).prompt).removeprefix(name).strip()


async def test_use_of_an_edited_shipped_preset_writes_nothing_and_loads_the_edit(config):
    async with make_app(device=DEVICE).run_test(size=(160, 48)) as pilot:
        main_screen = pilot.app.main_screen
        presets = await open_presets(pilot)
        ctx = presets.query_one("#field-ctx_size", Input)
        ctx.focus()
        ctx.value = "1024"
        # the form is checked when Input.Changed reaches the screen; Use takes what that check made
        await wait_until(pilot, lambda: presets.edited is not None and presets.edited.ctx_size == 1024)
        await pilot.press("ctrl+u")  # in a field: Use, not the Input's "erase to the start"
        await wait_until(pilot, lambda: pilot.app.screen is main_screen)
        assert ctx.value == "1024"
        await wait_until(pilot, lambda: main_screen.ledger is not None and main_screen.ledger.ctx_size == 1024)
        assert main_screen.selection.preset_name == "as-is (edited)"
        assert main_screen.query_one("#preset-select", Select).value == "as-is (edited)"
        assert not (config / "presets").exists()  # nothing written
        assert preset_origin(load_preset("as-is")) == "shipped" and load_preset("as-is").ctx_size == 2048
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: main_screen.engine is not None and main_screen.engine.load_options)
        assert main_screen.engine.load_options[-1]["preset"] == "as-is (edited)"


async def test_saving_under_a_shipped_name_asks_first_and_the_screen_reverts_it(config):
    saved = config / "presets" / "as-is.toml"
    async with make_app(device=DEVICE).run_test(size=(160, 48)) as pilot:
        presets = await open_presets(pilot)
        assert not presets.query_one("#revert-preset", Button).display  # nothing to revert yet
        presets.query_one("#field-ctx_size", Input).value = "1024"
        await wait_until(pilot, lambda: presets.edited is not None and presets.edited.ctx_size == 1024)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmModal))
        await pilot.press("escape")  # the safe answer: nothing written
        await wait_until(pilot, lambda: pilot.app.screen is presets)
        assert not saved.exists()
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmModal))
        await pilot.click("#confirm")
        await wait_until(pilot, saved.exists)
        assert tomllib.loads(saved.read_text())["ctx_size"] == 1024
        await wait_until(pilot, lambda: listed_origin(presets, "as-is") == "user, replaces shipped")
        assert presets.query_one("#revert-preset", Button).display
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not saved.exists())
        assert (config / "presets" / "as-is.toml.reverted").exists()  # the user's version is kept aside
        await wait_until(pilot, lambda: listed_origin(presets, "as-is") == "shipped")
        assert presets.query_one("#field-ctx_size", Input).value == "2048"
        assert not presets.query_one("#revert-preset", Button).display
    assert load_preset("as-is").ctx_size == 2048


async def test_saving_an_edit_keeps_the_keys_the_form_does_not_show_and_writes_the_new_fields(config):
    # A user preset with keys the form has no field for: an edit saved from the form must keep them.
    folder = config / "presets"
    folder.mkdir(parents=True)
    (folder / "mine.toml").write_text('name = "mine"\nctx_size = 2048\ngpu_layers = 4\n'
                                      'special_tokens_in_messages = true\ncpu_cores = "1"\n', encoding="utf-8")
    async with make_app(device=DEVICE).run_test(size=(160, 48)) as pilot:
        presets = await open_presets(pilot)
        option_list = presets.query_one("#preset-list", OptionList)
        option_list.highlighted = option_list.get_option_index("mine")
        await wait_until(pilot, lambda: presets.query_one("#field-name", Input).value == "mine")
        assert presets.query_one("#field-cpu_cores", Input).value == "1"
        assert presets.edited is not None and presets.edited.gpu_layers == 4  # unchanged: the file's own preset
        presets.query_one("#field-ctx_size", Input).value = "1024"
        presets.query_one("#field-parallel", Input).value = "2"
        presets.query_one("#field-cpu_cores", Input).value = "0-1"
        await wait_until(pilot, lambda: presets.edited is not None and presets.edited.parallel == 2
                         and presets.edited.cpu_cores == (0, 1) and presets.edited.ctx_size == 1024)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: tomllib.loads((folder / "mine.toml").read_text()).get("parallel") == 2)
        saved = load_preset("mine")
        assert (saved.ctx_size, saved.parallel, saved.cpu_cores) == (1024, 2, (0, 1))
        assert saved.gpu_layers == 4 and saved.special_tokens_in_messages
        # an empty cpu_cores leaves the key out: threads choose the cores again
        presets.query_one("#field-cpu_cores", Input).value = ""
        await wait_until(pilot, lambda: presets.edited is not None and presets.edited.cpu_cores == ())
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "cpu_cores" not in tomllib.loads((folder / "mine.toml").read_text()))
        assert load_preset("mine").gpu_layers == 4


def test_cli_reverts_a_user_preset_that_replaces_a_shipped_one(config, capsys):
    from workbench.core.config.preset import Preset

    save_user_preset(Preset(name="as-is", ctx_size=512))
    assert preset_origin(load_preset("as-is")) == "user"
    assert main(["presets", "revert", "as-is"]) == 0
    assert "as-is.toml.reverted" in capsys.readouterr().out
    assert preset_origin(load_preset("as-is")) == "shipped" and load_preset("as-is").ctx_size == 2048
    assert main(["presets", "revert", "as-is"]) == 2  # nothing left to revert: one line, exit 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "as-is" in err
    save_user_preset(Preset(name="mine"))
    assert main(["presets", "revert", "mine"]) == 2  # not a shipped name
    assert "not a shipped preset" in capsys.readouterr().err


@pytest.mark.parametrize("size", [(80, 24), (120, 34)])
async def test_presets_screen_fields_verdict_and_buttons_fit_on_screen(size):
    width, height = size
    async with make_app(device=DEVICE).run_test(size=size) as pilot:
        presets = await open_presets(pilot)
        await pilot.pause()
        for field in presets.query("#preset-form Input, #preset-form Select, #preset-form Switch"):
            least = 4 if isinstance(field, Switch) else 10  # a switch is 4 cells wide at any size
            assert field.region.width >= least, f"{field.id} is {field.region.width} cells wide"
        for widget_id in ("#preset-verdict", "#use-preset", "#save-preset", "#copy-command"):
            region = presets.query_one(widget_id).region
            assert region.width > 0 and region.height > 0, widget_id
            assert region.right <= width and region.bottom <= height - 1, f"{widget_id} at {region}"  # above the footer
        # the ledger is predicted in a worker: its verdict follows the form
        await wait_until(pilot, lambda: "FITS" in str(presets.query_one("#preset-verdict", Static).content))
        # the first field can be typed into and the check follows
        presets.query_one("#field-ctx_size", Input).focus()
        await pilot.press("end", "0")
        assert presets.query_one("#field-ctx_size", Input).value == "20480"
        verdict = presets.query_one("#preset-verdict", Static)
        await wait_until(pilot, lambda: "edited, not saved" in str(verdict.content))
        switch = presets.query_one("#field-flash_attn", Switch)
        assert switch.region.height >= 1 and switch.region.bottom <= height
