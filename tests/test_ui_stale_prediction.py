"""A ledger prediction that finishes after a later one is dropped: the ledger shown is the latest choice's.

A prediction runs in a thread worker; choosing again cancels the worker, but its thread runs on and
posts when it ends. Here the first choice's prediction is held in its thread until the second choice's
is shown, then let go.
"""

from fakes import Held, handled, make_app, wait_until
from textual.widgets import Select

from workbench.ui import engine_work
from workbench.ui.messages import LedgerPredicted, SplitPredicted

SLOW, FAST = "raspberry-pi-5-8gb", "rk3588-8gb"


async def test_a_prediction_that_ends_after_a_later_one_does_not_replace_it(monkeypatch):
    predict = Held.patched(monkeypatch, engine_work, "predict_ledger", lambda model, preset, device: device.name == SLOW)
    arrived: list = []
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48), message_hook=arrived.append) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None and screen.ledger.device == "jetson-orin-nano-8gb")
        select = screen.query_one("#device-select", Select)
        select.value = SLOW
        await wait_until(pilot, predict.held.is_set, what="the first choice's prediction held in its thread")
        select.value = FAST
        await wait_until(pilot, lambda: screen.ledger is not None and screen.ledger.device == FAST)
        predict.release.set()

        def held_ledger():
            return next((m for m in arrived if isinstance(m, LedgerPredicted) and m.choice.device_name == SLOW), None)

        await wait_until(pilot, held_ledger, what="the held prediction's ledger")
        await wait_until(pilot, lambda: any(isinstance(m, SplitPredicted) and m.request == held_ledger().request
                                            for m in arrived), what="the held prediction's split, posted after it")
        await handled(pilot, screen, arrived)
        assert screen.ledger.device == FAST and screen.verdict_line.prediction.choice.device_name == FAST
        assert select.value == FAST
