"""Profiles whose GPU published runs show slower than the CPU: no layer goes there by default, and offloading warns."""

from __future__ import annotations

import pytest

from workbench.cli.main import main
from workbench.core.config.device_accelerator import offload_problems
from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset, shipped_preset_names
from workbench.core.engine.load_plan import plan_load
from workbench.core.errors import PresetError
from workbench.core.files.model_ref import resolve_model

RK3588 = ("rk3588-8gb", "rk3588s-4gb")


@pytest.fixture
def offloading_preset(tmp_path):
    path = tmp_path / "offload-all.toml"
    path.write_text('name = "offload-all"\ngpu_layers = "all"\n')
    return path


@pytest.mark.parametrize("name", RK3588)
def test_rk3588_profiles_say_their_mali_is_slower_and_cite_the_run(name):
    device = load_device(name)
    assert device.accelerator == "vulkan" and device.accelerator_slower_than_cpu
    assert "github.com/ggml-org/llama.cpp/issues/17783" in dict(device.notes)["accelerator_slower_than_cpu"]


@pytest.mark.parametrize("name", RK3588)
def test_no_shipped_preset_sends_a_layer_to_the_mali(name):
    device = load_device(name)
    presets = [load_preset(name) for name in sorted(shipped_preset_names())]
    assert presets
    assert [(preset.name, offload_problems(preset, device)) for preset in presets] == [
        (preset.name, []) for preset in presets]


def test_a_preset_that_offloads_is_warned_in_the_load_plan_and_the_ledger(offloading_preset, capsys):
    preset = load_preset(str(offloading_preset))
    assert offload_problems(preset, load_device("jetson-orin-nano-8gb")) == []  # CUDA on Orin is not slower
    plan = plan_load(resolve_model("bundled"), preset, load_device("rk3588-8gb"), allow_overbudget=True)
    assert [w for w in plan.warnings if "slower than this board's CPU" in w] == [
        "gpu_layers sends all layers to rk3588-8gb's vulkan GPU when llama.cpp is built with it, and published runs "
        "show it slower than this board's CPU (" + dict(load_device("rk3588-8gb").notes)["accelerator_slower_than_cpu"]
        + ") (Set gpu_layers = 0 to keep every layer on the CPU)"]
    assert main(["ledger", "bundled", "--preset", str(offloading_preset), "--device", "rk3588s-4gb"]) == 0
    assert "warning: gpu_layers sends all layers to rk3588s-4gb's vulkan GPU" in capsys.readouterr().out


@pytest.mark.parametrize(("lines", "expected"), [
    ('accelerator = "vulkan"\naccelerator_slower_than_cpu = "yes"\n', "true or false"),
    ("accelerator_slower_than_cpu = true\n", "accelerator is none"),
])
def test_a_bad_slower_flag_is_an_error_with_the_line(tmp_path, lines, expected):
    path = tmp_path / "board.toml"
    path.write_text(f'name = "board"\nram_total_mb = 4096\nmem_bandwidth_gbs = 10\ncores = 4\n{lines}')
    with pytest.raises(PresetError, match=expected):
        load_device(str(path))
