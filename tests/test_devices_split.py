"""The per-device ledger without llama.cpp: placement by hand from llama.cpp's rule, budgets, verdicts.

The placement rule (llama-model.cpp load_tensors): n_layer + 1 slots (the last is the
output layer); with g GPU layers, slots from max(n_layer + 1 - g, 0) go to devices; slot
il goes to the first device whose cumulative split point exceeds (il - start) / act.
The expected values below are that arithmetic done by hand in the comments.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.gguf_factory import TinyModel, write_tiny_gguf
from workbench.core.config.preset import Preset
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.placement import layer_devices
from workbench.core.ledger.split import predict_split
from workbench.core.ledger.split_types import SplitDevice

MIB = 1024 * 1024
_F32_LAYERS = {role: "F32" for role in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                                        "ffn_gate", "ffn_up", "ffn_down")}


def test_all_layers_on_two_equal_devices():
    # 30 layers + output = 31 slots, start 0, act 31; split points 0.5, 1.0.
    # slot il -> device 0 while il/31 < 0.5, i.e. il <= 15 (15/31 = 0.484, 16/31 = 0.516).
    placement = layer_devices(30, -1, [1.0, 1.0])
    assert placement == tuple([0] * 16 + [1] * 15)


def test_tensor_split_three_to_one():
    # points 0.75, 1.0: il/31 < 0.75 for il <= 23 (23/31 = 0.742, 24/31 = 0.774).
    placement = layer_devices(30, -1, [3.0, 1.0])
    assert placement == tuple([0] * 24 + [1] * 7)


def test_ten_gpu_layers_are_the_last_nine_and_the_output():
    # start = 31 - 10 = 21: slots 21..30 (layers 21-29 and the output) on the one device.
    assert layer_devices(30, 10, [1.0]) == tuple([-1] * 21 + [0] * 10)


def test_no_devices_or_no_gpu_layers_keep_everything_on_the_cpu():
    assert layer_devices(30, 0, [1.0]) == tuple([-1] * 31)
    assert layer_devices(30, -1, []) == tuple([-1] * 31)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """4 layers, n_embd 64, F32: each layer's tensors are whole multiples of 32 bytes."""
    path = tmp_path_factory.mktemp("split") / "tiny.gguf"
    write_tiny_gguf(path, TinyModel(n_layer=4, n_embd=64, n_head=4, n_head_kv=4, n_ff=128, n_vocab=256,
                                    token_embd_type="F32", output_type="F32", layer_types=_F32_LAYERS))
    return read_gguf(path)


def _layer_bytes(model, layer: int) -> int:
    return sum(t.n_bytes for t in model.tensors if t.name.startswith(f"blk.{layer}."))


def test_device_weights_and_kv_follow_their_layers(tiny_model):
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, tensor_split=(1.0, 1.0), mmap=False)
    nodes = [SplitDevice("RPC0", "127.0.0.1:1", budget_bytes=1 << 30, budget_source="test"),
             SplitDevice("RPC1", "127.0.0.1:2", budget_bytes=1 << 30, budget_source="test")]
    split = predict_split(tiny_model, preset, nodes, host_budget_bytes=1 << 32)
    host, first, second = split.devices
    # 5 slots, points 0.5/1.0: il/5 < 0.5 for il 0..2 -> RPC0 holds layers 0-2, RPC1 layer 3 + output.
    assert (first.layers, first.holds_output) == ((0, 1, 2), False)
    assert (second.layers, second.holds_output) == ((3,), True)
    assert host.layers == () and not host.holds_output
    assert first.weights_bytes == sum(_layer_bytes(tiny_model, i) for i in (0, 1, 2))
    output = sum(t.n_bytes for t in tiny_model.tensors if t.name.startswith("output"))
    assert second.weights_bytes == _layer_bytes(tiny_model, 3) + output
    embd = next(t.n_bytes for t in tiny_model.tensors if t.name == "token_embd.weight")
    assert host.weights_bytes == embd  # the input layer never leaves the host
    # KV f16 at 256 cells: per layer K and V of 4 heads x 16 dims x 256 cells x 2 bytes = 32 KiB each.
    assert first.kv_bytes == 3 * 2 * 4 * 16 * 256 * 2
    assert second.kv_bytes == 1 * 2 * 4 * 16 * 256 * 2
    assert host.kv_bytes == 0


def test_tied_embeddings_are_duplicated_onto_the_output_device(tmp_path):
    path = tmp_path / "tied.gguf"
    write_tiny_gguf(path, TinyModel(n_layer=2, n_embd=64, n_head=4, n_head_kv=4, n_ff=128, n_vocab=256,
                                    token_embd_type="F32", output_type=None, layer_types=_F32_LAYERS))
    model = read_gguf(path)
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, mmap=False)
    split = predict_split(model, preset, [SplitDevice("RPC0", "h:1", free_bytes=1 << 30, budget_bytes=1 << 30)],
                          host_budget_bytes=1 << 32)
    embd = next(t.n_bytes for t in model.tensors if t.name == "token_embd.weight")
    host, node = split.devices
    assert host.weights_bytes == embd
    assert node.weights_bytes == embd + sum(t.n_bytes for t in model.tensors
                                            if t.name.startswith(("blk.", "output_norm")))


def test_a_node_over_its_budget_is_named_with_the_line_that_breaks(tiny_model):
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, mmap=False)
    small = SplitDevice("RPC0", "10.0.0.2:50052", budget_bytes=64 * 1024, budget_source="profile tiny")
    split = predict_split(tiny_model, preset, [small], host_budget_bytes=1 << 32)
    assert split.verdict == "does not fit"
    assert "RPC0" in split.reason and "the weights" in split.reason


def test_a_node_without_budget_is_unknown_not_zero(tiny_model):
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, mmap=False)
    split = predict_split(tiny_model, preset, [SplitDevice("RPC0", "10.0.0.2:50052")], host_budget_bytes=1 << 32)
    node = split.devices[1]
    assert node.budget_bytes is None and node.verdict == "unknown"
    assert "no budget" in node.reason
    assert split.decode_full.tokens_per_s is None  # the node's bandwidth is unknown: no made-up bound
    assert any("RPC0" in item for item in split.decode_full.missing)


def test_best_split_balances_unequal_budgets(tiny_model):
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, mmap=False)
    big = SplitDevice("RPC0", "h:1", budget_bytes=64 * MIB, budget_source="t")
    small = SplitDevice("RPC1", "h:2", budget_bytes=16 * MIB, budget_source="t")
    split = predict_split(tiny_model, preset, [big, small], host_budget_bytes=1 << 32)
    assert sum(split.best_tensor_split) == 5  # 4 layers + output, all handed out
    assert split.best_tensor_split[0] > split.best_tensor_split[1]


def test_network_term_is_named_when_the_link_dominates(tiny_model):
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, mmap=False)
    slow_link = SplitDevice("RPC0", "h:1", budget_bytes=1 << 30, budget_source="t", bandwidth_bytes_per_s=50e9,
                            bandwidth_source="t", link_bytes_per_s=1e6, link_latency_s=0.002)
    split = predict_split(tiny_model, preset, [slow_link], host_budget_bytes=1 << 32,
                          host_bandwidth_bytes_per_s=50e9)
    bound = split.decode_empty
    # per token: 2 x 64 x 4 bytes of activations + 256 x 4 bytes of logits over 1 MB/s = 1.536 ms, + 2 ms round trip;
    # the weights (~0.4 MB) at 50 GB/s take microseconds.
    link = next(t for t in bound.terms if t.what == "link to RPC0")
    assert link.seconds == pytest.approx((2 * 64 * 4 + 256 * 4) / 1e6)
    assert bound.dominant().startswith("network-bound")


def test_unified_gpu_counts_against_the_host_budget(tiny_model):
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, mmap=False)
    gpu = SplitDevice("CUDA0", free_bytes=1 << 30, shares_host_memory=True)
    split = predict_split(tiny_model, preset, [gpu], host_budget_bytes=1 << 32)
    host, device = split.devices
    assert host.overhead_bytes >= device.weights_bytes + device.kv_bytes + device.compute_bytes
    assert device.budget_bytes is None and "unified" in device.reason


def test_split_mode_none_puts_everything_on_main_gpu(tiny_model):
    preset = Preset(name="t", ctx_size=256, gpu_layers=-1, split_mode="none", main_gpu=1, mmap=False)
    nodes = [SplitDevice("RPC0", "h:1", budget_bytes=1 << 30), SplitDevice("RPC1", "h:2", budget_bytes=1 << 30)]
    split = predict_split(tiny_model, preset, nodes, host_budget_bytes=1 << 32)
    assert split.devices[1].layers == () and split.devices[2].layers == (0, 1, 2, 3)
    assert dataclasses.replace(preset, split_mode="layer").split_mode == "layer"


def test_layer_counts_as_tensor_split_place_exactly_that_many():
    # 5 slots, counts 3 and 2: points 0.6, 1.0; slot j -> device 0 while j/5 < 0.6, i.e. j = 0, 1, 2.
    assert layer_devices(4, -1, [3.0, 2.0]) == (0, 0, 0, 1, 1)
    # 31 slots split 16/15 (the balanced split of two equal nodes): 16/31 is not < 16/31, so slot 16 moves on.
    assert layer_devices(30, -1, [16.0, 15.0]).count(0) == 16


def test_a_cuda_profile_with_its_own_memory_is_a_device_with_that_budget(tiny_model):
    from workbench.core.config.preset import DeviceProfile
    from workbench.core.rpc.nodes import split_devices

    host = DeviceProfile(name="desktop", ram_total_mb=32768, mem_bandwidth_gbs=50, accelerator="cuda", vram_mb=8192,
                         vram_bandwidth_gbs=448)
    devices = split_devices(host, (), (), ())
    assert [(d.name, d.budget_bytes, d.shares_host_memory) for d in devices] == [("CUDA0", 8192 * MIB, False)]
    preset = Preset(name="t", ctx_size=256, gpu_layers=2, mmap=False)
    split = predict_split(tiny_model, preset, devices, host_budget_bytes=host.budget_mb * MIB,
                          host_bandwidth_bytes_per_s=50e9)
    cpu, gpu = split.devices
    # gpu_layers = 2 of 4 + output: start 5 - 2 = 3 -> layer 3 and the output on CUDA0, layers 0-2 on the CPU.
    assert (gpu.layers, gpu.holds_output, cpu.layers) == ((3,), True, (0, 1, 2))
    assert gpu.budget_bytes == 8192 * MIB and gpu.verdict == "fits"
    assert any(term.what == "CUDA0 memory" and term.source == "vram_bandwidth_gbs of desktop"
               for term in split.decode_empty.terms)


def test_a_jetson_style_unified_gpu_shares_the_host_budget(tiny_model):
    from workbench.core.config.preset import DeviceProfile
    from workbench.core.rpc.nodes import split_devices

    host = DeviceProfile(name="jetson", ram_total_mb=8192, mem_bandwidth_gbs=68, accelerator="cuda")
    (gpu,) = split_devices(host, (), (), ())
    assert gpu.shares_host_memory and gpu.budget_bytes is None
