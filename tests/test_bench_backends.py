"""`bench --backends cpu,gpu`: each preset with gpu_layers 0 and all, side by side; the gpu run refused without a GPU."""

from __future__ import annotations

import pytest

from workbench.cli.main import main
from workbench.core.bench.backend_sweep import backend_plan, parse_backends
from workbench.core.config.preset import Preset
from workbench.core.config.preset_split import ALL_LAYERS
from workbench.core.engine.backends import Backend, BackendDevice, LoadedBackends, loaded_backends
from workbench.core.errors import WorkbenchError

CPU = Backend("CPU", (BackendDevice("CPU", "test CPU", "CPU", None, None),))
CUDA = Backend("CUDA", (BackendDevice("CUDA0", "NVIDIA H100", "GPU", 70 << 30, 80 << 30),))
PRESETS = (Preset(name="a"), Preset(name="b"))


def test_with_a_gpu_device_each_preset_runs_on_both_next_to_each_other():
    loaded = LoadedBackends(True, "", (CPU, CUDA, Backend("RPC", ())))
    plan = backend_plan(PRESETS, ("cpu", "gpu"), loaded, "hint")
    assert [(p.name, p.gpu_layers) for p in plan.presets] == [
        ("a@cpu", 0), ("a@gpu", ALL_LAYERS), ("b@cpu", 0), ("b@gpu", ALL_LAYERS)]
    assert plan.refused == ()


def test_the_loaded_cpu_build_refuses_the_gpu_run_and_says_why():
    plan = backend_plan(PRESETS[:1], ("cpu", "gpu"), loaded_backends(), "See `workbench doctor`.")
    assert [p.name for p in plan.presets] == ["a@cpu"]
    assert plan.refused == (("a@gpu", "not run: the loaded llama.cpp has no GPU device "
                                      f"({', '.join(loaded_backends().names)}); gpu_layers = all would run on the CPU. "
                                      "See `workbench doctor`."),)


def test_rpc_nodes_take_the_layers_without_a_local_gpu():
    plan = backend_plan((Preset(name="a", rpc=("127.0.0.1:50052",)),), ("gpu",), LoadedBackends(True, "", (CPU,)), "")
    assert [p.name for p in plan.presets] == ["a@gpu"]


@pytest.mark.parametrize("text", ["", "cpu,tpu", " , "])
def test_bad_backends_are_refused(text):
    with pytest.raises(WorkbenchError, match="--backends"):
        parse_backends(text)


def test_cli_gpu_only_on_this_build_is_refused_before_any_engine_starts(capsys):
    assert main(["bench", "--presets", "as-is", "--backends", "gpu", "-r", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("workbench: as-is@gpu: not run: the loaded llama.cpp has no GPU device")
    assert err[1] == "workbench: bench: no backend of --backends can run here. See the lines above"
