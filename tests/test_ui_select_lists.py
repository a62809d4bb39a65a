"""At 80x24 an open selector lists one line per name (the device list wrapped names over three lines)."""

import pytest
from fakes import make_app, wait_until
from textual.widgets import Select
from textual.widgets._select import SelectOverlay


@pytest.mark.parametrize("select_id", ["device-select", "preset-select"])
async def test_an_open_list_has_one_line_per_name_at_80x24(select_id):
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(80, 24)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        select = screen.query_one(f"#{select_id}", Select)
        select.expanded = True
        overlay = select.query_one(SelectOverlay)
        await wait_until(pilot, lambda: overlay.region.height > 0)
        await pilot.pause()
        names = [str(overlay.get_option_at_index(i).prompt) for i in range(overlay.option_count)]
        border = overlay.region.height - overlay.content_region.height
        assert overlay.region.height - border == len(names), (overlay.region, names)
        assert screen.region.contains_region(overlay.region)
        assert overlay.content_region.width >= min(36, max(len(name) for name in names))
