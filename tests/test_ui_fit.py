"""The app's Fit action beside the preset select and the hub browser's "best fit for this device" marker,
at 80x24 and 160x48."""

from dataclasses import replace

import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from fakes import Held, make_app, wait_until
from hubserver import hub  # noqa: F401 - the fixture `served` takes
from test_ui_hub_tab import open_hub_files

from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.paths import bundled_model_path
from workbench.ui import fit_work
from workbench.ui.widgets.hub_browser import BEST_FIT

SIZES = [(80, 24), (160, 48)]
REPO = "bartowski/SmolLM2-135M-Instruct-GGUF"  # the first curated repository: listed when the tab opens
FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"


@pytest.fixture
def served(request):
    return request.getfixturevalue("hub")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_fit_offers_the_choice_as_a_preset(size):
    async with make_app(device="rk3588s-4gb").run_test(size=size) as pilot:
        main = pilot.app.main_screen
        button = main.query_one("#fit-button")
        preset_select = main.query_one("#preset-select")
        await wait_until(pilot, lambda: main.ledger is not None)
        assert button.region.width > 0 and button.region.right <= size[0]  # on screen, beside the preset
        assert button.region.x >= preset_select.region.right
        button.press()
        await wait_until(pilot, lambda: main.selection.preset_name == "fit (unsaved)", 60)
        await wait_until(pilot, lambda: main.ledger is not None and main.ledger.preset == "fit (unsaved)", 60)
        # 3,496 MiB hold the bundled model at its whole trained context with the file as is
        trained = read_gguf(bundled_model_path()).n_ctx_train
        assert main.ledger.verdict != DOES_NOT_FIT and main.ledger.ctx_size == trained
        assert main.selection.preset().weights == "keep"
        assert preset_select.value == "fit (unsaved)"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_hub_browser_marks_the_best_fit(served, size, tmp_path):
    # the bundled Q4_1 file and an F16 one of a tiny llama: F16 loses nothing (llama.cpp's table) and fits
    f16 = write_arch_gguf(tmp_path / "f16.gguf", replace(ARCH_MODELS["llama"], weight_type="F16"))
    served.add_repo(REPO, {FILE: bundled_model_path(), "tiny-F16.gguf": f16}, downloads=4_000)
    async with make_app(device="rk3588s-4gb").run_test(size=size) as pilot:
        files = (await open_hub_files(pilot, rows=2)).query_one("#hub-files")
        await wait_until(pilot, lambda: files.get_cell("tiny-F16.gguf", "fit") == BEST_FIT, 60)
        assert files.get_cell(FILE, "fit") == ""


async def test_a_fit_that_ends_after_the_choice_changed_is_not_applied_to_the_new_choice(monkeypatch):
    """The search runs in a thread: the device is changed while it is held there, then it is let go."""
    search = Held.patched(monkeypatch, fit_work, "fit")
    async with make_app(device="rk3588s-4gb").run_test(size=(160, 48), notifications=True) as pilot:
        main = pilot.app.main_screen
        await wait_until(pilot, lambda: main.ledger is not None)
        main.query_one("#fit-button").press()
        await wait_until(pilot, search.held.is_set, what="the fit search held in its thread")
        main.query_one("#device-select").value = "raspberry-pi-5-8gb"
        await wait_until(pilot, lambda: main.ledger is not None and main.ledger.device == "raspberry-pi-5-8gb")
        search.release.set()
        await wait_until(pilot, lambda: any(n.title == "Fit" and "choice changed" in n.message
                                            for n in pilot.app._notifications), 60)
        assert main.selection.preset_name == "as-is" and main.query_one("#preset-select").value == "as-is"
        assert main.ledger.preset == "as-is" and main.ledger.device == "raspberry-pi-5-8gb"
