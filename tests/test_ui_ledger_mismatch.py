"""The app says in one notification when a buffer llama.cpp reports after a load is more than 5% off the ledger."""

from dataclasses import replace
from pathlib import Path

from arch_attention_2026 import ATTENTION_MODELS, write_attention_gguf
from fakes import wait_until

from workbench.core.config.presets import user_presets_dir
from workbench.core.units import MIB
from workbench.ui.app import WorkbenchApp
from workbench.ui.engine_session import LOADED
from workbench.ui.selection import Selection
from workbench.ui.widgets.ledger_panel import LedgerPanel


async def test_a_load_off_its_prediction_is_said_once_with_both_figures(tmp_path: Path):
    """deepseek32 without flash attention at ctx 8192 with a router gating the replay does not lay out: the
    formula's compute line is ~31% low (test_arch_attention_ledger.UNLAID_GATING)."""
    model = write_attention_gguf(tmp_path / "deepseek32.gguf", replace(ATTENTION_MODELS["deepseek32"], gating=3))
    user_presets_dir().mkdir(parents=True, exist_ok=True)
    (user_presets_dir() / "missed.toml").write_text(
        'name = "missed"\nweights = "keep"\nctx_size = 8192\nthreads = 1\n')
    app = WorkbenchApp(Selection(model_path=model, preset_name="missed", device_name="host"))
    async with app.run_test(size=(120, 34)) as pilot:
        screen = app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None, 60)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        loaded = screen.query_one(LedgerPanel).view.loaded
        # the notice follows the loaded phase within the same message handler
        await wait_until(pilot, lambda: any(n.title == "Ledger mismatch" for n in app._notifications), 30)
        said = [n for n in app._notifications if n.title == "Ledger mismatch"]
        assert len(said) == 1
        message = said[0].message
        assert message.startswith("llama.cpp's buffers differ from the ledger by more than 5%: compute ")
        assert f"vs {screen.ledger.compute_bytes / MIB:,.1f} MiB predicted" in message and "\n" not in message
        assert f"{loaded.compute_buffer_bytes / MIB:,.1f} MiB reported" in message and "weights" not in message
