"""`workbench bench --rpc`: a row split over a real local RPC node carries its devices, predicted beside reported."""

from __future__ import annotations

import json

import pytest

from workbench.cli.main import main
from workbench.core.rpc.local_nodes import LocalNode


@pytest.fixture
def node():
    started = LocalNode()
    yield started
    started.stop()


def test_bench_rows_carry_devices_and_the_split_bound(node, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    preset = tmp_path / "tiny.toml"
    preset.write_text('name = "tiny"\nctx_size = 256\nbatch_size = 64\nubatch_size = 64\nthreads = 1\n')
    out = tmp_path / "rows.jsonl"
    text = tmp_path / "eval.txt"  # a short evaluation text: perplexity is not what this test is about
    text.write_text("The board reads its weights from memory for every token it writes. " * 4)
    code = main(["bench", "--presets", str(preset), "--rpc", f"{node.address}@host", "-p", "8", "-n", "4", "-r", "1",
                 "--ppl-ctx", "64", "--eval-text", str(text), "--output", "jsonl", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    row = next(json.loads(line) for line in out.read_text().splitlines() if '"devices"' in line)
    devices = row["devices"]
    assert [(d["name"], d["endpoint"]) for d in devices] == [("CPU", None), ("RPC0", node.address)]
    for device in devices:
        # llama.cpp's model + KV + compute lines for the device, against the ledger's: within 2%
        assert device["reported"] == pytest.approx(device["predicted"], rel=0.02)
    # the node's profile is the host's: its bandwidth and the probed link make a bound with a network term
    assert row["split_bound_tps"] > 0 and row["network_ms_per_token"] > 0
    assert f"RPC0 {node.address}" in captured.out and "network" in captured.out  # the markdown note
