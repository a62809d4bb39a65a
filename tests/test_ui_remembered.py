"""The app remembers theme, model, preset, device and chat width across a restart; a corrupt settings file is one line."""

from __future__ import annotations

import os

from fakes import FakeEngine, FakeSampler, wait_until
from gguf_factory import write_tiny_gguf

from workbench.cli.main import build_parser
from workbench.core.config.app_settings import AppSettings, load_settings, save_settings, settings_path
from workbench.core.units import MIB
from workbench.ui.run import build_app


def _app(argv: list[str]):
    return build_app(build_parser().parse_args(argv), engine_factory=FakeEngine,
                     sampler_factory=lambda pid: FakeSampler(pid), telemetry_interval_s=0.2)


async def test_settings_survive_a_restart_on_the_same_home(tmp_path):
    model = write_tiny_gguf(tmp_path / "mine-Q4_K_M.gguf")
    first = _app(["--model", str(model)])
    async with first.run_test(size=(160, 48)) as pilot:
        main = first.main_screen
        main.query_one("#preset-select").value = "long-context-kv4"
        main.query_one("#device-select").value = "raspberry-pi-5-8gb"
        first.theme = "projector-light"
        first.change_chat_share(10)  # 40 % (the starting share) + 10
        await wait_until(pilot, lambda: (first.keeper.settings.preset, first.keeper.settings.device) == (
            "long-context-kv4", "raspberry-pi-5-8gb") and first.keeper.settings.theme == "projector-light",
            what="the choice and the theme remembered")
    assert settings_path().is_file()

    second = _app([])
    async with second.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: str(second.main_screen.query_one("#chat-pane").styles.width) == "50fr",
                         what="the remembered chat width applied")
        await pilot.pause()
        assert second.theme == "projector-light"
        choice = second.selection.choice()
        assert (choice.model_path, choice.preset_name, choice.device_name) == (
            str(model), "long-context-kv4", "raspberry-pi-5-8gb")
        main = second.main_screen
        assert main.query_one("#device-select").value == "raspberry-pi-5-8gb"
        chat, panels = main.query_one("#chat-pane"), main.query_one("#panels")
        assert (str(chat.styles.width), str(panels.styles.width)) == ("50fr", "50fr")
        assert abs(chat.outer_size.width - panels.outer_size.width) <= 1  # half the width each, drawn
        assert second.startup_notes == []

    model.unlink()  # the remembered model is gone: said, and the bundled one is chosen
    third = _app([])
    assert third.startup_notes == [f"the last model {model} is gone; the bundled model is chosen"]
    assert third.selection.model_path != model


async def test_a_corrupt_settings_file_is_reported_in_one_line_and_ignored(tmp_path):
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'theme = "projector-light"\n[[[ not toml')
    app = _app([])
    (note,) = app.startup_notes
    assert note.startswith(f"settings: {path}: is not valid TOML") and "\n" not in note
    assert note.endswith("it is ignored (the defaults are used) and rewritten when a setting changes")
    async with app.run_test(size=(120, 34)) as pilot:
        await wait_until(pilot, lambda: app._notifications, what="the settings notice")
        assert app.theme == "workbench-dark"
        assert [n.message for n in app._notifications] == [note]
    assert load_settings().problem == ""  # the app's first save replaced the corrupt file whole


def test_bad_values_are_named_and_skipped_the_rest_is_kept(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('theme = "amber-field"\npreset = 7\nchat_share = 99\ndevice = "a\\u0007b"\nwhat = 1\n'
                    '[[system_prompts]]\nname = "terse"\ntext = "Answer in one line."\n'
                    '[[system_prompts]]\nname = ""\ntext = "x"\n')
    loaded = load_settings(path)
    assert loaded.settings == AppSettings(theme="amber-field", system_prompts=(("terse", "Answer in one line."),))
    for named in ("preset is a int", "chat_share 99 is not a whole percent in 20-80", "device holds a control",
                  "system_prompts entry 2", "unknown keys 'what'"):
        assert named in loaded.problem
    assert "\n" not in loaded.problem

    path.write_bytes(b"#" * (2 * MIB))
    too_large = load_settings(path)
    assert too_large.settings == AppSettings()
    assert too_large.problem.startswith(f"settings: {path}: 2.0 MiB is too large for a settings file (at most 1 MiB);")
    path.unlink()
    os.mkfifo(path)  # would block a plain open for ever
    fifo = load_settings(path)
    assert fifo.settings == AppSettings() and fifo.problem == (
        f"settings: {path}: is a named pipe (FIFO), not a settings file; it is ignored (the defaults are used) "
        "and rewritten when a setting changes")

    path.unlink()
    assert save_settings(loaded.settings, path) == "" and load_settings(path) == loaded.__class__(loaded.settings)
    assert not list(tmp_path.glob("*.tmp"))
