"""A device profile's fast_cores: checked with file:line errors, and threads = 0 on another big.LITTLE board predicts with them."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf_factory import TinyModel, write_tiny_gguf

from workbench.core.config.devices import load_device
from workbench.core.config.preset import Preset
from workbench.core.errors import PresetError
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.speed import predict_speed

HEAD = 'name = "board"\nram_total_mb = 4096\nmem_bandwidth_gbs = 20\ncores = 8\n'


def _profile(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "board.toml"
    path.write_text(HEAD + body, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["rk3588-8gb", "rk3588s-4gb"])
def test_the_rk3588_profiles_predict_threads_0_with_the_4_big_cores(tmp_path: Path, name: str):
    device = load_device(name)
    assert device.cores == 8 and device.fast_cores == 4
    model = read_gguf(write_tiny_gguf(tmp_path / "tiny.gguf", TinyModel()))
    prediction = predict_speed(model, Preset(name="p", threads=0), device, n_ctx=512)
    assert prediction.threads == 4
    assert "4 threads (threads = 0: the board's 4 fast cores of 8, fast_cores)" in prediction.basis
    # An explicit thread count is the preset's own, with no fast-core reason attached.
    explicit = predict_speed(model, Preset(name="p", threads=8), device, n_ctx=512)
    assert explicit.threads == 8 and "fast cores" not in explicit.basis


def test_a_homogeneous_board_keeps_cores_minus_one(tmp_path: Path):
    device = load_device(str(_profile(tmp_path, "")))
    assert device.fast_cores is None
    model = read_gguf(write_tiny_gguf(tmp_path / "tiny.gguf", TinyModel()))
    prediction = predict_speed(model, Preset(name="p", threads=0), device, n_ctx=512)
    assert prediction.threads == 7 and "the board's 8 cores minus one" in prediction.basis


@pytest.mark.parametrize(("body", "message"), [
    ("fast_cores = 0\n", "fast_cores = 0 is below the minimum of 1"),
    ("fast_cores = 9\n", "fast_cores = 9 is above the maximum of 8"),
    ("fast_cores = -4\n", "fast_cores = -4 is below the minimum of 1"),
    ('fast_cores = "four"\n', "fast_cores"),
    ("fast_cores = 2.5\n", "fast_cores"),
])
def test_bad_fast_cores_are_refused_with_the_line(tmp_path: Path, body: str, message: str):
    path = _profile(tmp_path, body)
    with pytest.raises(PresetError) as error:
        load_device(str(path))
    assert message in str(error.value)
    assert error.value.where == f"{path}:5"
