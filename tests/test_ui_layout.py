"""Every size shows the whole ledger: at 120x34 its headers, totals and headroom row are not cut."""

import pytest
from fakes import make_app, rendered, wait_until

from workbench.ui.engine_session import LOADED
from workbench.ui.widgets.ledger_panel import LedgerPanel


@pytest.mark.parametrize("size", [(120, 34), (160, 48)])
async def test_the_ledger_panel_is_whole_when_the_panels_are_side_by_side(size):
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=size) as pilot:
        screen = pilot.app.main_screen
        await pilot.press("ctrl+l")
        panel = screen.query_one(LedgerPanel)
        # the loaded figures come with the load; the predicted ones from the prediction worker, which a
        # Ctrl+L pressed at once can overtake: wait for both, not for a moment
        await wait_until(pilot, lambda: screen.phase == LOADED and None not in (panel.view.loaded, panel.view.ledger))
        lines = rendered(panel).rstrip("\n").split("\n")
        assert len(lines) <= panel.content_region.height, f"{len(lines)} lines in {panel.content_region.height}"
        text = "\n".join(lines)
        for header in ("predicted", "llama.cpp", "measured"):
            assert header in text  # not "predic…"
        total = next(line for line in lines if line.strip().startswith("total"))
        headroom = next(line for line in lines if line.strip().startswith("headroom"))
        # the fake engine reports 94.3 + 45.0 + 66.5 MiB of buffers: 205.8, shown as 206 (whole, not "2…")
        assert "206" in total.split()
        assert len(headroom.split()) >= 3
