"""A ledger prediction that finishes after a later one is dropped: the ledger shown is the latest choice's.

A prediction runs in a thread worker; choosing again cancels the worker, but its thread runs on and
posts when it ends. Here the first choice's prediction is held in its thread until the second choice's
is shown, then let go.
"""

import threading

from fakes import make_app, wait_until
from textual.widgets import Select

from workbench.ui import engine_work
from workbench.ui.messages import SplitPredicted

SLOW, FAST = "raspberry-pi-5-8gb", "rk3588-8gb"


async def test_a_prediction_that_ends_after_a_later_one_does_not_replace_it(monkeypatch):
    held, release = threading.Event(), threading.Event()
    real_predict = engine_work.predict_ledger

    def predict_ledger(model, preset, device):
        if device.name == SLOW:
            held.set()
            release.wait(60)
        return real_predict(model, preset, device)

    monkeypatch.setattr(engine_work, "predict_ledger", predict_ledger)
    splits: list[SplitPredicted] = []  # the last message a prediction posts, as the screen receives it

    def hook(message) -> None:
        if isinstance(message, SplitPredicted):
            splits.append(message)

    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48), message_hook=hook) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None and screen.ledger.device == "jetson-orin-nano-8gb")
        select = screen.query_one("#device-select", Select)
        select.value = SLOW
        await wait_until(pilot, lambda: held.is_set(), what="the first choice's prediction held in its thread")
        select.value = FAST
        await wait_until(pilot, lambda: screen.ledger is not None and screen.ledger.device == FAST)
        seen = len(splits)
        release.set()
        # The held thread posts its ledger, then its split: once the screen receives the split, it has
        # handled the ledger before it.
        await wait_until(pilot, lambda: len(splits) > seen, what="the held prediction's messages received")
        await pilot.pause()
        assert screen.ledger.device == FAST and screen.verdict_line.prediction.choice.device_name == FAST
        assert select.value == FAST
