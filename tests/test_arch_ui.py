"""The app on other architectures: the KV panel's window cache, a Gemma model's built-in template and a base model in completion mode (real engine)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from arch_models import arch_model, write_arch_gguf
from fakes import make_app, panel_host, rendered, wait_until
from textual.widgets import Input, Static, Switch

from workbench.core.config.chat_mode import BUILTIN_TEMPLATE, COMPLETION
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.ui.app import WorkbenchApp
from workbench.ui.engine_session import LOADED
from workbench.ui.panel_views import LedgerView
from workbench.ui.screens.preset_screen import PresetScreen
from workbench.ui.selection import Selection
from workbench.ui.widgets.chat_view import Notice
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.prompt_input import PromptInput


async def test_kv_panel_shows_the_window_cache_beside_the_global_one():
    panel = KvPanel(classes="panel")
    async with panel_host(panel).run_test(size=(60, 20)) as pilot:
        panel.n_ctx, panel.bytes_per_token, panel.cells_used = 4096, 256, 3000
        panel.window_cells, panel.window_layers = 1024, "7 of 8 layers keep the last 512 tokens"
        await pilot.pause()
        text = " ".join(rendered(panel).split())  # the panel wraps its lines
        assert "global layers: cells used 3,000 / 4,096" in text
        assert "window cache" in text and "1,024 / 1,024 cells" in text  # past the window it stays full
        assert "7 of 8 layers keep the last 512 tokens" in text
        panel.cells_used = 256
        await pilot.pause()
        assert "256 / 1,024 cells" in rendered(panel)


def _app(model: Path) -> WorkbenchApp:
    selection = Selection(model_path=model, preset_name="as-is", device_name="x86-mini-pc-16gb")
    selection.add_model(model)
    return WorkbenchApp(selection, telemetry_interval_s=0.5)


def _notices(screen) -> str:
    return "\n".join(notice.title for notice in screen.query(Notice))


async def _ask(pilot, screen, text: str) -> None:
    screen.conversation.sampling = dataclasses.replace(screen.conversation.sampling, temperature=0.0, seed=1,
                                                       max_tokens=8)
    answered = len(screen.conversation.stats)
    prompt = screen.query_one(PromptInput)
    prompt.value = text
    prompt.focus()
    await pilot.press("enter")
    await wait_until(pilot, lambda: len(screen.conversation.stats) > answered and screen.phase == LOADED, 120)


def _last_turn(screen):
    stats = screen.conversation.stats
    return stats[max(stats)]


async def test_a_gemma_model_without_template_chats_through_the_builtin_one(tmp_path: Path):
    model = write_arch_gguf(tmp_path / "gemma2.gguf", arch_model("gemma2"))
    app = _app(model)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None, 60)
        split = screen.ledger.kv_split
        assert split is not None and screen.query_one(KvPanel).window_cells == split.swa_cells
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        loaded = screen.engine.loaded
        assert loaded.chat_mode == BUILTIN_TEMPLATE
        await wait_until(pilot, lambda: loaded.chat_notice in _notices(screen), 30)
        assert "window cache" in rendered(screen.query_one(KvPanel))
        await _ask(pilot, screen, "hello")
        assert _last_turn(screen).generated_tokens > 0


async def test_a_base_model_runs_in_completion_mode_with_a_notice(tmp_path: Path):
    model = write_arch_gguf(tmp_path / "base.gguf", arch_model("llama", turn_tokens=""))
    app = _app(model)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None, 60)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        assert screen.engine.loaded.chat_mode == COMPLETION
        await wait_until(pilot, lambda: "completion mode" in _notices(screen), 30)
        await _ask(pilot, screen, "abc")
        finished = _last_turn(screen)
        assert finished.prompt_tokens == 4  # <s> ▁a b c: the text itself, no template around it
        assert "<|" not in finished.text


async def test_the_preset_editor_edits_swa_full_and_chat_template(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48)) as pilot:
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PresetScreen))
        presets = pilot.app.screen
        await wait_until(pilot, lambda: presets.query_one("#field-name", Input).value == "as-is")
        presets.query_one("#field-swa_full", Switch).value = True
        presets.query_one("#field-chat_template", Input).value = "gemma"
        await wait_until(pilot, lambda: presets.edited is not None and presets.edited.swa_full
                         and presets.edited.chat_template == "gemma")
        command = str(presets.query_one("#server-command", Static).content)
        assert "--swa-full" in command and "--chat-template gemma" in command
        presets.query_one("#field-chat_template", Input).value = "gemmma"  # a typo is named, with the fix
        await wait_until(pilot, lambda: presets.edited is None)
        assert "Did you mean gemma" in str(presets.query_one("#preset-problems", Static).content)


async def test_the_ledger_panel_shows_expected_rss_and_an_unverified_build():
    ledger = predict_ledger(read_gguf(bundled_model_path()), Preset("p"), DeviceProfile("roomy", 65536))
    panel = LedgerPanel(classes="panel")
    async with panel_host(panel).run_test(size=(70, 40)) as pilot:
        panel.view = LedgerView(ledger=ledger)
        await pilot.pause()
        text = rendered(panel)
        assert "RSS at load" in text and f"{ledger.resident.after_load_bytes / 2**20:,.0f}" in text
        assert "RSS full ctx" in text and "unverified" not in text
        panel.view = LedgerView(ledger=dataclasses.replace(
            ledger, unverified="unverified: installed llama-cpp-python 0.4.0 is outside the "
                               "verified 0.3.36; compute and overhead lines may be off"))
        await pilot.pause()
        assert "unverified: installed llama-cpp-python 0.4.0" in " ".join(rendered(panel).split())
