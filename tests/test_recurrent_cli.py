"""`workbench ledger --parallel N` and `workbench inspect` on models with recurrent layers and sliding windows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arch_models import ARCH_MODELS, write_arch_gguf
from arch_recurrent import RECURRENT_MODELS, write_recurrent_gguf


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("recurrent-cli")
    paths = {arch: write_recurrent_gguf(folder / f"{arch}.gguf", model) for arch, model in RECURRENT_MODELS.items()}
    paths["gemma2"] = write_arch_gguf(folder / "gemma2.gguf", ARCH_MODELS["gemma2"])
    return paths


def _ledger(cli, path: Path, *extra: str) -> dict:
    code, out, err = cli("ledger", str(path), "--preset", "as-is", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_ledger_parallel_multiplies_the_recurrent_state_not_the_kv_cache(cli, files):
    model = RECURRENT_MODELS["granitehybrid"]
    # Mamba2 (llama-hparams.cpp): conv (d_conv - 1) x (d_inner + 2 groups x d_state) and state d_state x d_inner, f32
    per_layer = 4 * (3 * (512 + 2 * 128) + 128 * 512)
    assert (model.ssm_d_conv, model.ssm_d_inner, model.ssm_d_state, model.ssm_n_group) == (4, 512, 128, 1)
    one, four = _ledger(cli, files["granitehybrid"]), _ledger(cli, files["granitehybrid"], "--parallel", "4")
    assert (one["n_seq"], four["n_seq"]) == (1, 4)
    assert one["rs_bytes"] == 3 * per_layer and four["rs_bytes"] == 4 * 3 * per_layer  # layers 0-2 are Mamba2
    assert one["kv_bytes"] == four["kv_bytes"] == 256 * 2048  # one attention layer, f16, 64-wide head, 2048 cells
    assert four["total_bytes"] - one["total_bytes"] >= 3 * 3 * per_layer
    assert four["recurrent"]["is_recurrent"] == [True, True, True, False]


def test_ledger_text_names_the_recurrent_state_and_the_sequences(cli, files):
    code, out, _ = cli("ledger", str(files["qwen3next"]), "--preset", "as-is", "--parallel", "2")
    assert code == 0
    assert "recurrent state" in out and "3 layers x 2 seq" in out and "gated delta-net" in out
    assert "2 (parallel)" in out


@pytest.mark.parametrize("bad", ["0", "257", "-3"])
def test_ledger_parallel_out_of_range_is_refused(cli, files, bad):
    code, _, err = cli("ledger", str(files["lfm2"]), "--preset", "as-is", "--parallel", bad)
    assert code == 2 and "--parallel" in err and "1 to 256" in err


def test_window_cache_grows_with_the_sequences(cli, files):
    """kv_unified with 4 sequences: the window cache holds window x 4 + ubatch cells, padded to 256 (llama-kv-cache-iswa.cpp)."""
    window, ubatch = 512, 512
    one = _ledger(cli, files["gemma2"], "--ctx", "8192")
    four = _ledger(cli, files["gemma2"], "--ctx", "8192", "--parallel", "4")
    assert one["kv_split"]["swa_cells"] == -(-(window + ubatch) // 256) * 256
    assert four["kv_split"]["swa_cells"] == -(-(window * 4 + ubatch) // 256) * 256
    assert four["kv_split"]["global_cells"] == one["kv_split"]["global_cells"] == 8192


def test_inspect_shows_which_layers_attend_and_which_are_recurrent(cli, files):
    code, out, _ = cli("inspect", str(files["lfm2"]))
    assert code == 0
    assert "attention (KV cache) 2, 5; recurrent (LFM2 short-conv state) 0-1, 3-4" in out
    assert "4.0 KiB per sequence" in out  # 4 layers x 128 x (3 - 1) x 4 bytes
    code, out, _ = cli("inspect", str(files["qwen3next"]), "--json")
    data = json.loads(out)["recurrent"]
    assert data["attention_layers"] == [3] and data["recurrent_layers"] == [0, 1, 2] and data["dtype"] == "f32"
    code, out, _ = cli("inspect", str(files["gemma2"]), "--json")
    assert json.loads(out)["recurrent"] is None
