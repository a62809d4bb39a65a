"""The panels describe the loaded model and preset; another selection shows its own prediction
with "not loaded — Ctrl+L reloads with it", and Ctrl+L reloads with it in one press."""

from fakes import make_app, wait_until
from textual.widgets import Button, Static

from workbench.ui.loaded_choice import Choice, LoadedChoice
from workbench.ui.engine_session import LOADED
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel

DEVICE = "jetson-orin-nano-8gb"


def verdict(screen) -> str:
    return str(screen.query_one("#verdict", Static).content)


async def test_panels_keep_the_loaded_preset_until_ctrl_l_reloads_with_the_selection():
    engines = []
    async with make_app(engines, device=DEVICE).run_test(size=(160, 48)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED and screen.session.choice.loaded_ledger is not None)
        ledger_panel, kv = screen.query_one(LedgerPanel), screen.query_one(KvPanel)
        as_is_kv_per_token = kv.bytes_per_token
        # as-is keeps f16 K/V; edge-int4-kv8 stores q8_0: 34/32 bytes per element instead of 2
        screen.select_preset("edge-int4-kv8")
        await wait_until(pilot, lambda: "not loaded — Ctrl+L reloads with it" in verdict(screen))
        assert "selected edge-int4-kv8" in verdict(screen) and "MiB" in verdict(screen)
        assert ledger_panel.view.ledger.preset == "as-is" and ledger_panel.view.ledger.ctx_size == 2048
        assert kv.bytes_per_token == as_is_kv_per_token and kv.cache_types == "K f16 / V f16"
        assert str(screen.query_one("#load-button", Button).label) == "Reload"
        await pilot.press("ctrl+l")  # one press: unload the old, load the selection
        await wait_until(pilot, lambda: len(engines[0].load_options) == 2 and screen.phase == LOADED)
        await wait_until(pilot, lambda: ledger_panel.view.ledger is not None and ledger_panel.view.ledger.preset == "edge-int4-kv8")
        assert engines[0].load_options[-1]["preset"] == "edge-int4-kv8"
        assert kv.cache_types == "K q8_0 / V q8_0" and kv.bytes_per_token < as_is_kv_per_token
        await wait_until(pilot, lambda: "not loaded" not in verdict(screen))
        assert str(screen.query_one("#load-button", Button).label) == "Unload"
        await pilot.press("ctrl+l")  # same choice: Ctrl+L unloads
        await wait_until(pilot, lambda: engines[0].loaded is None)


def test_loaded_choice_follows_loads_and_predictions():
    as_is, q8 = Choice("m.gguf", "as-is", "host"), Choice("m.gguf", "quality-q8", "host")
    state = LoadedChoice()
    assert not state.differs(q8) and state.panel_ledger("selected") == "selected"  # nothing loaded
    state.predicted(as_is, "ledger as-is")
    state.load_started(as_is)
    state.load_finished()
    assert state.loaded == as_is and state.panel_ledger("anything") == "ledger as-is"
    state.predicted(q8, "ledger q8")
    assert state.differs(q8) and state.panel_ledger("ledger q8") == "ledger as-is"
    state.load_started(q8)  # its prediction came before: the load takes it along
    state.load_finished()
    assert state.loaded_ledger == "ledger q8" and not state.differs(q8)
    state.unloaded()
    assert state.loaded is None and state.panel_ledger("sel") == "sel"
