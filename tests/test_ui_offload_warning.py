"""Before loading, the main screen warns of a preset that offloads layers to a GPU slower than the CPU."""

import dataclasses

from fakes import make_app, wait_until
from textual.widgets import Static

from workbench.ui.device_problems import DeviceProblem
from workbench.ui.engine_session import IDLE


def verdict(screen) -> str:
    return str(screen.query_one("#verdict", Static).content)


async def test_gpu_layers_on_the_rk3588_profile_are_warned_about_before_loading(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))  # no user preset shadows as-is
    async with make_app(device="rk3588-8gb").run_test(size=(160, 48)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        assert screen.verdict_line.prediction.problems == ()  # as-is keeps every layer on the CPU
        assert "gpu_layers" not in verdict(screen)
        screen.choice_bar.use_unsaved(dataclasses.replace(screen.selection.preset(), gpu_layers=20))
        await wait_until(pilot, lambda: "gpu_layers sends" in verdict(screen))
        prediction = screen.verdict_line.prediction
        assert prediction.choice.preset_name == "as-is (unsaved)"
        warnings = [problem for problem in prediction.problems if isinstance(problem, DeviceProblem)]
        assert [problem.level for problem in warnings] == ["warning"]
        assert "20 layers to rk3588-8gb's vulkan GPU" in warnings[0].message
        assert "slower than this board's CPU" in warnings[0].message
        text = verdict(screen)
        assert text.startswith("✔ FITS") and "Set gpu_layers = 0 to keep every layer on the CPU" in text
        assert screen.phase == IDLE  # said before anything loads
