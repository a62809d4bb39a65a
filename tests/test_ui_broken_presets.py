"""The app with a malformed user preset: the others are listed, the broken file is named (issue 10, item 6)."""

from fakes import make_app, wait_until
from textual.widgets import OptionList

from workbench.ui.screens.preset_screen import PresetScreen
from workbench.ui.selection import preset_options

NESTED = 'name = "deep"\ntensor_split = ' + "[" * 5000 + "]" * 5000 + "\n"


async def test_a_broken_user_preset_is_named_and_the_rest_listed(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    user = tmp_path / "config" / "presets"
    user.mkdir(parents=True)
    (user / "deep.toml").write_text(NESTED)
    (user / "mine.toml").write_text('name = "mine"\nweights = "keep"\n')
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48)) as pilot:
        said = []
        monkeypatch.setattr(pilot.app, "notify", lambda message, **kwargs: said.append(message))
        choices = [value for _, value in preset_options(pilot.app.main_screen.selection)]  # the top selector's
        assert "mine" in choices and "as-is" in choices and "deep" not in choices  # the selector still works
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PresetScreen))
        listed = pilot.app.screen.query_one("#preset-list", OptionList)
        await wait_until(pilot, lambda: listed.option_count > 0)
        names = [listed.get_option_at_index(i).id for i in range(listed.option_count)]
        assert "mine" in names and "balanced-q4km" in names and "deep" not in names
        assert any(line.startswith(f"broken: {user / 'deep.toml'}:2: values nested more than 32 levels deep")
                   for line in said)
