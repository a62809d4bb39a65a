"""When the ledger does not fit, the load dialog offers the ledger's fixes as one-key changes (Pilot, fake engine)."""

from __future__ import annotations

from fakes import make_app, wait_until

from workbench.core.config.preset import DeviceProfile
from workbench.core.config.presets import load_preset
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.paths import bundled_model_path
from workbench.core.units import MIB


async def test_a_fix_is_one_key_away_and_makes_it_fit(tmp_path):
    model = read_gguf(bundled_model_path())
    roomy = predict_ledger(model, load_preset("as-is"), DeviceProfile("roomy", 65536))
    budget_mb = int(roomy.total_bytes / MIB) - 12  # 12 MB short: a smaller ubatch or context fits it
    device = tmp_path / "short-board.toml"
    device.write_text(f'name = "short-board"\nram_total_mb = {budget_mb + 200}\nmem_bandwidth_gbs = 10\ncores = 4\n\n'
                      '[reserves_mb]\nos = 200\n')
    engines = []
    async with make_app(engines, device=str(device)).run_test(size=(160, 48)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        before = screen.ledger
        assert before.verdict == DOES_NOT_FIT and before.fixes and before.fixes[0].fits
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: pilot.app.screen.query("#fixes"))
        text = str(pilot.app.screen.query_one("#fixes").content)
        assert f"[1] {before.fixes[0].change}" in text and "saves" in text and "cost" in text
        await pilot.press("1")
        await wait_until(pilot, lambda: pilot.app.screen is screen and screen.ledger is not before)
        assert screen.ledger.verdict != DOES_NOT_FIT
        assert screen.ledger.total_bytes == before.total_bytes - before.fixes[0].saved_bytes
        assert "unsaved" in screen.selection.preset_name
        assert engines == []  # nothing was loaded: the user loads the fixed preset with Ctrl+L
