"""The split's predicted decode rate: each device's share of the speed model's cost, its figures' source, the link terms."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from gguf_factory import TinyModel, write_tiny_gguf

from workbench.cli.split_output import devices_text, split_json
from workbench.core.config.preset import DeviceProfile, Preset, ThreadRates
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.speed import speed_model
from workbench.core.ledger.speed_costs import decode_rows_by_layer, model_costs
from workbench.core.ledger.split import predict_split
from workbench.core.ledger.split_types import SplitDevice
from workbench.core.rpc.nodes import is_local
from workbench.ui.widgets.ledger_panel import split_decode_line

RATES = ThreadRates(threads=1, token_us=300.0, layer_us=20.0, read_gbs=(("F32", 8.0), ("F16", 10.0), ("Q8_0", 12.0)),
                    kv_read_gbs=None, prefill_token_us=0.0, prefill_layer_us=0.0, prefill_gflops=())
HOST = DeviceProfile(name="host", ram_total_mb=8192, mem_bandwidth_gbs=40, cores=2, thread_rates=(RATES,),
                     notes=(("speed", "a probe"),))
LATENCY, LINK = 0.0005, 100e6


def _model(tmp_path: Path):
    return read_gguf(write_tiny_gguf(tmp_path / "tiny.gguf", TinyModel(n_vocab=4096)))


def _node(endpoint: str, profile: DeviceProfile | None) -> SplitDevice:
    return SplitDevice(name="RPC0", endpoint=endpoint, budget_bytes=4 << 30, budget_source="test",
                       bandwidth_bytes_per_s=40e9, link_bytes_per_s=LINK, link_latency_s=LATENCY,
                       speed_profile=profile, speed_source="test figures" if profile else "")


def test_no_devices_is_the_single_device_speed_model(tmp_path: Path):
    model = _model(tmp_path)
    preset = Preset(name="p", threads=1, ctx_size=512)
    split = predict_split(model, preset, (), host_budget_bytes=8 << 30, host_bandwidth_bytes_per_s=40e9,
                          host_profile=HOST)
    speed, _ = speed_model(model, preset, HOST, threads=1)
    assert split.rate_empty.tokens_per_s == pytest.approx(speed.decode_tps(0), rel=1e-9)
    assert split.rate_full.tokens_per_s == pytest.approx(speed.decode_tps(split.ctx_size - 1), rel=1e-9)
    assert split.rate_empty.tokens_per_s < split.decode_empty.tokens_per_s  # fixed costs put it under the bound
    # At two threads, weights streamed from memory (a 0.1 MB cache) cost per weight row too: the same there.
    streamed = replace(RATES, threads=2, row_ns=20.0, cache_mb=0.1)
    host = replace(HOST, thread_rates=(streamed,))
    preset = Preset(name="p", threads=2, ctx_size=512)
    split = predict_split(model, preset, (), host_budget_bytes=8 << 30, host_bandwidth_bytes_per_s=40e9,
                          host_profile=host)
    speed, _ = speed_model(model, preset, host, threads=2)
    assert speed.costs.decode_rows > 0 and speed.costs.decode_bytes_total > 0.1e6
    assert split.rate_empty.tokens_per_s == pytest.approx(speed.decode_tps(0), rel=1e-9)


def test_a_node_reads_its_layers_from_its_own_memory_at_the_probed_unmapped_rate(tmp_path: Path):
    model = _model(tmp_path)
    preset = Preset(name="p", threads=1, ctx_size=512, gpu_layers=-1, rpc=("127.0.0.1:50052",))

    def node_term(unmapped: float | None):
        profile = replace(HOST, thread_rates=(replace(RATES, unmapped_read_gbs=unmapped),))
        rate = predict_split(model, preset, (_node("127.0.0.1:50052", profile),), host_budget_bytes=8 << 30,
                             host_bandwidth_bytes_per_s=40e9, host_profile=HOST).rate_empty
        return next(t for t in rate.terms if t.what.startswith("RPC0")).seconds, rate.basis

    mapped_s, mapped_words = node_term(None)
    fixed_s = (RATES.token_us + model.n_layer * RATES.layer_us) / 1e6  # no attention or KV figures in RATES
    # Q8_0 probed at 6 of the mapped 12 GB/s in llama.cpp's own memory: every type the node reads at half its rate
    halved_s, halved_words = node_term(6.0)
    assert halved_s - fixed_s == pytest.approx(2 * (mapped_s - fixed_s), rel=1e-9)
    assert "weights in its own memory at 0.50x the mapped read rate" in halved_words
    assert "own memory" not in mapped_words
    # the host's layers with mmap are a view of the file: its own prediction keeps the mapped rates
    alone = Preset(name="p", threads=1, ctx_size=512)
    host = replace(HOST, thread_rates=(replace(RATES, unmapped_read_gbs=6.0),))
    assert predict_split(model, alone, (), host_budget_bytes=8 << 30, host_bandwidth_bytes_per_s=40e9,
                         host_profile=host).rate_empty.tokens_per_s == pytest.approx(
        predict_split(model, alone, (), host_budget_bytes=8 << 30, host_bandwidth_bytes_per_s=40e9,
                      host_profile=HOST).rate_empty.tokens_per_s, rel=1e-9)


def test_rows_by_layer_add_up_to_the_rows_a_token_computes(tmp_path: Path):
    tied = read_gguf(write_tiny_gguf(tmp_path / "tied.gguf", TinyModel(n_vocab=4096, output_type=None)))
    for model in (_model(tmp_path), tied):
        rows = decode_rows_by_layer(model)
        assert sum(rows.values()) == model_costs(model).decode_rows
        assert rows.get(-2, 0) == 0  # the token embedding's get_rows computes no mat-vec row


def test_a_node_holding_every_layer_adds_its_fixed_cost_and_the_link(tmp_path: Path):
    model = _model(tmp_path)
    alone = predict_split(model, Preset(name="p", threads=1, ctx_size=512), (), host_budget_bytes=8 << 30,
                          host_bandwidth_bytes_per_s=40e9, host_profile=HOST).rate_empty
    preset = Preset(name="p", threads=1, ctx_size=512, gpu_layers=-1, rpc=("127.0.0.1:50052",))
    split = predict_split(model, preset, (_node("127.0.0.1:50052", HOST),), host_budget_bytes=8 << 30,
                          host_bandwidth_bytes_per_s=40e9, host_profile=HOST)
    rate = split.rate_empty
    # The same reads and layers, now on the node: one more graph's fixed cost, the hidden state there
    # and back (f32), the logits back from the node holding the output, one round trip.
    sent = model.n_embd * 4 * 2 + model.n_vocab * 4
    expected = alone.seconds_per_token + RATES.token_us / 1e6 + sent / LINK + LATENCY
    assert rate.seconds_per_token == pytest.approx(expected, rel=1e-6)
    assert [t.source for t in rate.terms][:2] == ["host profile", "test figures"]
    assert f"RPC0: {model.n_layer} layers + output" in rate.basis and "one round trip a hop" in rate.basis
    # Beside the bound, in JSON and text, the bound's keys kept.
    data = json.loads(json.dumps(split_json(split, ())))
    assert data["decode_empty_context"]["tokens_per_s"] == split.decode_empty.tokens_per_s
    assert data["predicted_decode_empty_context"]["tokens_per_s"] == pytest.approx(1 / expected, rel=1e-6)
    assert f"predicted decode at empty context: {1 / expected:,.1f} tok/s" in devices_text(split, (), width=400)


def test_a_remote_node_without_figures_is_unavailable_never_zero(tmp_path: Path):
    model = _model(tmp_path)
    preset = Preset(name="p", threads=1, ctx_size=512, gpu_layers=-1, rpc=("10.0.0.7:50052",))
    split = predict_split(model, preset, (_node("10.0.0.7:50052", None),), host_budget_bytes=8 << 30,
                          host_bandwidth_bytes_per_s=40e9, host_profile=HOST)
    assert split.rate_empty.tokens_per_s is None
    assert any("RPC0 speed figures" in item for item in split.rate_empty.missing)
    assert "predicted decode at empty context: unavailable (RPC0 speed figures" in devices_text(split, (), width=400)
    # Without the host's profile there is no prediction at all (the bound still stands).
    bare = predict_split(model, preset, (_node("10.0.0.7:50052", None),), host_budget_bytes=8 << 30,
                         host_bandwidth_bytes_per_s=40e9)
    assert bare.rate_empty is None and split_json(bare, ())["predicted_decode_empty_context"] is None


@pytest.mark.parametrize(("address", "local"), [("127.0.0.1:50052", True), ("localhost:1", True), ("[::1]:5", True),
                                                ("10.0.0.7:50052", False), ("127x.example:1", False)])
def test_which_nodes_run_on_this_machine(address: str, local: bool):
    assert is_local(address) is local


def test_the_ledger_panel_line_gives_the_prediction_beside_the_bound(tmp_path: Path):
    model = _model(tmp_path)
    preset = Preset(name="p", threads=1, ctx_size=512, gpu_layers=-1, rpc=("127.0.0.1:50052",))
    for node, host, said in ((_node("127.0.0.1:50052", HOST), HOST, "tok/s predicted"),
                             (_node("10.0.0.7:50052", None), HOST, "predicted n/a (RPC0 speed figures"),
                             (_node("127.0.0.1:50052", HOST), None, "predicted n/a (no speed figures for the host)")):
        split = predict_split(model, preset, (node,), host_budget_bytes=8 << 30, host_bandwidth_bytes_per_s=40e9,
                              host_profile=host)
        line = split_decode_line(split)
        assert said in line and f"bound {split.decode_empty.tokens_per_s:,.1f} tok/s" in line
