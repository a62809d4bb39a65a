"""The split keys of presets and profiles (gpu_layers, split_mode, tensor_split, main_gpu, rpc; accelerator,
vram_mb), their one-line errors, the llama-server flags, and `ledger --rpc` / `ledger --json` devices."""

from __future__ import annotations

import json
import shlex
import socket
import tomllib
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.core.config.devices import load_device
from workbench.core.errors import PresetError
from workbench.core.config.presets import llama_server_command, load_preset, preset_from_mapping, preset_to_toml


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))


def _preset_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "split.toml"
    path.write_text('name = "split"\nctx_size = 512\n' + body, encoding="utf-8")
    return path


def test_split_keys_load_and_reach_the_llama_server_line(tmp_path):
    path = _preset_file(tmp_path, 'gpu_layers = "all"\ntensor_split = [3, 1]\nmain_gpu = 1\n'
                                  'rpc = ["192.168.7.2:50052", "192.168.7.3:50052"]\n')
    preset = load_preset(str(path))
    assert (preset.gpu_layers, preset.tensor_split, preset.main_gpu) == (-1, (3.0, 1.0), 1)
    assert preset.rpc == ("192.168.7.2:50052", "192.168.7.3:50052")
    argv = shlex.split(llama_server_command(preset, "/m.gguf"))
    for flag, value in (("-ngl", "all"), ("-ts", "3,1"), ("-mg", "1"), ("--rpc", "192.168.7.2:50052,192.168.7.3:50052")):
        assert argv[argv.index(flag) + 1] == value


def test_rpc_without_gpu_layers_means_all_layers_and_says_so_on_the_line():
    preset = preset_from_mapping({"name": "n", "rpc": ["10.0.0.2:50052"]})
    argv = shlex.split(llama_server_command(preset, "/m.gguf"))
    assert argv[argv.index("-ngl") + 1] == "all"


def test_a_preset_without_split_keys_has_no_split_flags():
    argv = shlex.split(llama_server_command(preset_from_mapping({"name": "plain"}), "/m.gguf"))
    assert not {"-ngl", "-ts", "-sm", "-mg", "--rpc"} & set(argv)


def test_split_keys_round_trip_through_toml():
    preset = preset_from_mapping({"name": "rt", "gpu_layers": 12, "split_mode": "none", "tensor_split": [1, 2.5],
                                  "main_gpu": 1, "rpc": ["127.0.0.1:50052"]})
    again = preset_from_mapping(tomllib.loads(preset_to_toml(preset)))
    assert again == preset


@pytest.mark.parametrize(("body", "line", "words"), [
    ("gpu_layers = -3\n", 3, 'Write gpu_layers = "all"'),
    ('gpu_layers = "most"\n', 3, 'neither a number of layers nor "all"'),
    ('split_mode = "rows"\n', 3, "Did you mean row?"),
    ("tensor_split = []\n", 3, "0 entries"),
    ("tensor_split = [1, -1]\n", 3, "is not a proportion"),
    ("tensor_split = [0, 0]\n", 3, "all zeros"),
    ('tensor_split = "3,1"\n', 3, "expected a list of proportions"),
    ("main_gpu = 16\n", 3, "above the maximum of 15"),
    ('rpc = ["10.0.0.2"]\n', 3, "is not host:port"),
    ('rpc = ["10.0.0.2:50052@board"]\n', 3, "only --rpc takes"),
    ('rpc = "10.0.0.2:50052"\n', 3, "a list of"),
])
def test_bad_split_keys_name_file_line_and_fix(tmp_path, body, line, words):
    path = _preset_file(tmp_path, body)
    with pytest.raises(PresetError) as caught:
        load_preset(str(path))
    assert caught.value.where == f"{path}:{line}"
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def _device_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "board.toml"
    path.write_text('name = "board"\nram_total_mb = 8192\nmem_bandwidth_gbs = 25\ncores = 4\n' + body, encoding="utf-8")
    return path


def test_accelerator_unified_or_own_memory(tmp_path):
    unified = load_device(str(_device_file(tmp_path, 'accelerator = "vulkan"\n')))
    assert (unified.accelerator, unified.vram_mb, unified.unified_memory) == ("vulkan", None, True)
    own = load_device(str(_device_file(tmp_path, 'accelerator = "cuda"\nvram_mb = 12288\nvram_bandwidth_gbs = 360\n')))
    assert (own.accelerator, own.vram_mb, own.vram_bandwidth_gbs, own.unified_memory) == ("cuda", 12288, 360.0, False)
    assert load_device(str(_device_file(tmp_path, ""))).accelerator == "none"


@pytest.mark.parametrize(("body", "words"), [
    ('accelerator = "cdua"\n', "Did you mean cuda?"),
    ("vram_mb = 4096\n", "accelerator is none"),
    ('accelerator = "cuda"\nvram_bandwidth_gbs = 300\n', "no memory of its own"),
    ('accelerator = "cuda"\nvram_mb = 12\n', "below the minimum"),
])
def test_bad_accelerator_keys_are_one_line(tmp_path, body, words):
    with pytest.raises(PresetError) as caught:
        load_device(str(_device_file(tmp_path, body)))
    assert words in str(caught.value) and str(tmp_path / "board.toml") in str(caught.value)


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ledger_json_has_devices_and_a_node_budget_from_its_profile(tmp_path, capsys):
    preset = _preset_file(tmp_path, "gpu_layers = 10\n")
    board = _device_file(tmp_path, "[reserves_mb]\nos = 1024\n")
    port = _dead_port()
    code = main(["ledger", "bundled", "--preset", str(preset), "--device", str(board),
                 "--rpc", f"127.0.0.1:{port}@{board}", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    names = [device["name"] for device in data["devices"]]
    assert names == ["CPU", "RPC0"]
    node = data["devices"][1]
    assert node["endpoint"] == f"127.0.0.1:{port}"
    assert node["budget_bytes"] == (8192 - 1024) * 1024 * 1024  # the profile's budget, by hand
    # gpu_layers = 10 of SmolLM2's 30 layers + output: the last 9 repeating layers and the output.
    assert node["layers"] == 9 and node["holds_output"]
    for key in ("weights_bytes", "kv_bytes", "compute_bytes", "total_bytes", "verdict"):
        assert key in node
    assert data["split"]["nodes"][0]["reachable"] is False
    assert "connection refused" in data["split"]["nodes"][0]["reason"]
    # the node's link was not measured: the bound is unavailable, not invented
    assert data["split"]["decode_full_context"]["tokens_per_s"] is None


def test_ledger_with_a_bad_rpc_option_is_one_line(capsys):
    code = main(["ledger", "bundled", "--preset", "as-is", "--rpc", "127.0.0.1:99999"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "port" in err
