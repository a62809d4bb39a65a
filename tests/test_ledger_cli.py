"""`workbench inspect` and `workbench ledger`: output, JSON keys, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gguf_factory import TinyModel, write_tiny_gguf
from workbench.cli.cmd_inspect import type_mix_text
from workbench.core.errors import WorkbenchError
from workbench.core.gguf.reader import read_gguf
from workbench.core.files.model_ref import resolve_model
from workbench.core.paths import bundled_model_path

LEDGER_KEYS = {"weights_bytes", "kv_bytes", "compute_bytes", "overhead_bytes", "total_bytes", "budget_bytes",
               "headroom_bytes", "verdict", "max_ctx_by_kv_type", "decode_tps_bound"}


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))


def test_inspect_bundled_text(cli):
    code, out, _ = cli("inspect", "bundled")
    assert code == 0
    assert "architecture     llama" in out
    assert "chat template    yes" in out
    assert "% Q4_1" in out and "bits per weight" in out
    assert "vocabulary       49,152 tokens" in out


def test_inspect_json_and_tensors(tmp_path: Path, cli):
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    code, out, _ = cli("inspect", str(path), "--json", "--tensors")
    assert code == 0
    data = json.loads(out)
    assert data["n_layer"] == 2 and data["file_type"] == "Q4_K_M" and data["has_chat_template"] is True
    assert abs(sum(data["type_mix"].values()) - 1) < 0.01
    assert len(data["tensors"]) == data["n_tensors"]
    code, out, _ = cli("inspect", str(path), "--tensors")
    assert "blk.1.ffn_down.weight" in out and "Q6_K" in out


def test_type_mix_text():
    assert type_mix_text((("Q4_K", 0.62), ("Q6_K", 0.30), ("F32", 0.08))) == "62% Q4_K, 30% Q6_K, 8% F32"
    assert type_mix_text((("Q4_1", 0.999), ("F32", 0.001))) == "100% Q4_1, <1% F32"


def test_ledger_table(cli):
    code, out, _ = cli("ledger", "bundled", "--preset", "edge-int4-kv8", "--device", "jetson-orin-nano-8gb")
    assert code == 0
    assert "left for the LLM             6,192" in out
    assert "KV cache" in out and "ctx 4096, q8_0/q8_0" in out
    assert "verdict: FITS" in out
    assert "decode bound at 68 GB/s" in out


def test_ledger_json_keys_and_ctx_override(cli):
    code, out, _ = cli("ledger", "bundled", "--preset", "as-is", "--device", "rk3588s-4gb", "--ctx", "1000", "--json")
    assert code == 0
    data = json.loads(out)
    assert LEDGER_KEYS <= set(data)
    assert data["ctx_size"] == 1024  # llama.cpp pads to 256
    assert data["total_bytes"] == sum(data[k] for k in ("weights_bytes", "cpu_repack_bytes", "kv_bytes", "compute_bytes",
                                                        "overhead_bytes"))
    assert data["budget_bytes"] == (4096 - 600) * 1024 * 1024
    assert set(data["max_ctx_by_kv_type"]) == {"f16", "q8_0+flash_attn", "q4_0+flash_attn"}
    assert data["decode_tps_bound"]["empty_context"] > data["decode_tps_bound"]["full_context"] > 0


def test_ledger_without_a_preset_is_the_file_as_it_is(cli):
    # Like chat, files and fit: no --preset means the file's own weights, not an argparse error.
    outs = [cli("ledger", "bundled", *extra, "--device", "rk3588s-4gb", "--json") for extra in ((), ("--preset", "as-is"))]
    assert [done.returncode for done in outs] == [0, 0]
    assert json.loads(outs[0].stdout)["preset"] == "as-is"
    assert outs[0].stdout == outs[1].stdout


def test_ledger_unknown_preset_is_one_line(cli):
    code, out, err = cli("ledger", "bundled", "--preset", "no-such-preset", "--device", "host")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no-such-preset" in err


def test_resolve_model():
    assert resolve_model("bundled") == bundled_model_path()
    with pytest.raises(WorkbenchError, match="workbench models"):
        resolve_model("/nowhere/model.gguf")


def test_broken_file_exits_2_with_one_line(tmp_path: Path, cli):
    page = tmp_path / "model.gguf"
    page.write_bytes(b"<!DOCTYPE html><html><body>Rate limit exceeded</body></html>")
    done = cli("inspect", str(page))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("workbench: ") and "this is an HTML page, not a GGUF" in done.stderr

    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()[:50_000])
    done = cli("ledger", str(truncated), "--preset", "as-is", "--device", "jetson-orin-nano-8gb")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "the download is incomplete" in done.stderr.lower()


def test_missing_model_exits_2(cli):
    done = cli("inspect", "/nowhere/model.gguf")
    assert done.returncode == 2 and "no such model file" in done.stderr and done.stderr.count("\n") == 1


def test_ledger_shows_the_presets_problems_for_this_model(tmp_path: Path, cli):
    # A ledger that says FITS must not hide that the model was trained for far less context.
    code, out, _ = cli("ledger", "bundled", "--preset", "as-is", "--device", "rk3588s-4gb", "--ctx", "20000")
    assert code == 0
    assert "warning: ctx_size = 20224 is beyond the 8192 tokens" in out
    code, out, _ = cli("ledger", "bundled", "--preset", "as-is", "--device", "rk3588s-4gb", "--json")
    assert json.loads(out)["problems"] == []

    # head dim 48 (256 / 4 heads would be 64): a q4_0 K cache's 32-value blocks do not divide it.
    f16 = {role: "F16" for role in ("attn_norm", "ffn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")}
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", TinyModel(key_length=48, value_length=48, layer_types=f16))
    odd = tmp_path / "odd-kv.toml"
    odd.write_text('cache_type_k = "q4_0"\nflash_attn = true\n')
    code, out, _ = cli("ledger", str(tiny), "--preset", str(odd), "--device", "rk3588s-4gb")
    assert code == 0
    assert "error: cache_type_k = q4_0 stores blocks of 32 values but" in out and "head dimension is 48" in out


def test_empty_model_argument_says_no_model_given(cli):
    code, out, err = cli("inspect", "")
    assert code == 2 and out == ""
    assert err.startswith("workbench: no model given. ")


def test_inspect_sizes_say_mib_as_they_are_binary(cli):
    # `workbench models` and `files` print decimal MB (98.4 MB for the bundled file); inspect
    # divides by 2**20 and so must not call the same file "93.8 MB".
    code, out, _ = cli("inspect", "bundled")
    size = bundled_model_path().stat().st_size
    assert f"({size / 2**20:,.1f} MiB, GGUF v3)" in out
    assert " MB" not in out


def test_no_context_that_fits_reads_none_not_zero(tmp_path: Path, cli):
    board = tmp_path / "tiny-board.toml"
    board.write_text('name = "tiny-board"\nram_total_mb = 300\nmem_bandwidth_gbs = 10\ncores = 4\n[reserves_mb]\nos = 100\n')
    code, out, _ = cli("ledger", "bundled", "--preset", "as-is", "--device", str(board))
    assert code == 3 and "verdict: DOES NOT FIT" in out
    assert "largest context that fits: f16 none, q8_0+flash_attn none, q4_0+flash_attn none" in out


def test_ledger_prose_wraps_to_a_terminal_but_not_in_a_pipe():
    from workbench.cli.cmd_ledger import ledger_text
    from workbench.core.config.devices import load_device
    from workbench.core.ledger.predict import predict_ledger
    from workbench.core.config.presets import load_preset

    info = read_gguf(bundled_model_path())
    device = load_device("jetson-orin-nano-8gb")
    ledger = predict_ledger(info, load_preset("edge-int4-kv8"), device)
    narrow = ledger_text(ledger, "Q4_K_M", device.mem_bandwidth_gbs, info.n_ctx_train, width=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "\n  jetson-orin-nano-8gb" in narrow  # the verdict's tail, indented under it
    piped = ledger_text(ledger, "Q4_K_M", device.mem_bandwidth_gbs, info.n_ctx_train)
    assert "in the 6,192 MiB left for the LLM on jetson-orin-nano-8gb" in piped
