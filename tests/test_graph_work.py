"""A token's graph work (ops and elementwise elements) and what the speed model charges for it and for the padded KV view."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from arch_recurrent import RECURRENT_MODELS, write_recurrent_gguf

from workbench.core.config.preset import DeviceProfile, Preset, ThreadRates
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.graph_work import GraphWork, graph_work
from workbench.core.ledger.speed import speed_model

# One layer of llama.cpp's llm_build_llama without flash attention, for one token, counted by hand:
#   attn_norm RMS_NORM + MUL; Q, K, V MUL_MAT; RoPE of Q and of K; the K and V stores (SET_ROWS);
#   KQ MUL_MAT, SOFT_MAX (scale and mask fused), KQV MUL_MAT, CONT of the permuted heads; wo MUL_MAT;
#   residual ADD; ffn_norm RMS_NORM + MUL; gate and up MUL_MAT, SWIGLU (GLU), down MUL_MAT; residual ADD
LLAMA_LAYER_OPS = 2 + 3 + 2 + 2 + 4 + 1 + 1 + 2 + 3 + 1 + 1
# Outside the layers: the embedding GET_ROWS, the last layer's two GET_ROWS of the output rows, the
# output norm RMS_NORM + MUL and the output MUL_MAT.
LLAMA_OTHER_OPS = 1 + 2 + 2 + 1


def _llama_attention_elements(n_embd: int, q_width: int, kv_width: int) -> int:
    """What a layer's ops up to its attention output write for one token, leaving out the matrix products
    and the scores over cells: the attention norm (RMS_NORM then MUL by its weight), RoPE of Q and K, the K
    and V rows into the cache, the CONT of the heads."""
    return 2 * n_embd + q_width + kv_width + 2 * kv_width + q_width


def _llama_ffn_elements(n_embd: int, n_ff: int) -> int:
    """What the rest of the layer writes for one token: the residual ADD, the feed-forward norm, SWIGLU and the
    second residual ADD."""
    return n_embd + 2 * n_embd + n_ff + n_embd


def test_a_llama_prompt_token_s_ops_and_elements_are_llama_cpp_s(tmp_path: Path):
    model = ARCH_MODELS["llama"]  # 4 layers, 128 wide, 2 heads of 64, 1 KV head, feed-forward 384
    info = read_gguf(write_arch_gguf(tmp_path / "llama.gguf", model))
    attention, ffn = _llama_attention_elements(128, 128, 64), _llama_ffn_elements(128, 384)
    assert (attention, ffn) == (704, 896)
    # A prompt asks for its last token's logits: llama.cpp picks that row after the last layer's attention
    # (llm_build_llama: il == n_layer - 1 && inp_out_ids), so what follows, its feed-forward and the output
    # norm included, runs once a prompt. A prompt token adds its embedding row and 3 1/2 layers.
    assert graph_work(info) == GraphWork(nodes=4 * LLAMA_LAYER_OPS + LLAMA_OTHER_OPS,
                                         elements=128 + 4 * attention + 3 * ffn)


def test_a_family_without_a_graph_builder_counts_as_a_llama_stack_of_its_widths(tmp_path: Path):
    model = ARCH_MODELS["gemma2"]  # graph_families lays out no gemma2 graph; 6 layers of the llama widths
    info = read_gguf(write_arch_gguf(tmp_path / "gemma2.gguf", model))
    assert graph_work(info) == GraphWork(nodes=6 * LLAMA_LAYER_OPS + LLAMA_OTHER_OPS,
                                         elements=128 + 6 * _llama_attention_elements(128, 128, 64)
                                         + 5 * _llama_ffn_elements(128, 384))


def test_gemma3_and_olmoe_do_more_per_layer_than_llama(tmp_path: Path):
    def per_layer(arch: str) -> tuple[float, float]:
        info = read_gguf(write_arch_gguf(tmp_path / f"{arch}.gguf", replace(ARCH_MODELS[arch], n_vocab=4096)))
        work = graph_work(info)
        return work.nodes / info.n_layer, work.elements / info.n_layer

    llama_ops, llama_elements = per_layer("llama")
    for arch in ("gemma3", "olmoe"):  # Q/K norms and post-norms; a router, top-k and expert ops
        ops, elements = per_layer(arch)
        assert ops > 1.3 * llama_ops and elements > 1.5 * llama_elements


RATES = ThreadRates(threads=1, token_us=100, layer_us=10, read_gbs=(("Q8_0", 10.0),), kv_read_gbs=None,
                    prefill_token_us=1, prefill_layer_us=3, prefill_gflops=(("Q8_0", 50.0),), attn_gflops=10.0)


def _model(tmp_path: Path, rates: ThreadRates, ctx_size: int = 2048):
    info = read_gguf(write_arch_gguf(tmp_path / "llama.gguf", replace(ARCH_MODELS["llama"], n_vocab=4096)))
    device = DeviceProfile(name="b", ram_total_mb=4096, mem_bandwidth_gbs=20, thread_rates=(rates,))
    return speed_model(info, Preset(name="p", threads=1, ctx_size=ctx_size), device)


def test_measured_fixed_costs_are_charged_per_op_and_per_element_where_the_probe_measured_them(tmp_path: Path):
    layered, _ = _model(tmp_path, RATES)
    counted, basis = _model(tmp_path, replace(RATES, node_us=0.5, prefill_element_ns=2.0))
    work = GraphWork(nodes=counted.costs.graph_nodes, elements=counted.costs.prefill_elements)
    assert work == GraphWork(nodes=4 * LLAMA_LAYER_OPS + LLAMA_OTHER_OPS, elements=128 + 4 * 704 + 3 * 896)
    # 4 layers x 10 us replaced by 94 ops x 0.5 us; 4 layers x 3 us a prompt token by 5,632 elements x 2 ns
    assert counted.decode_seconds(0) - layered.decode_seconds(0) == pytest.approx((94 * 0.5 - 4 * 10) / 1e6)
    assert counted.prefill_seconds(512) - layered.prefill_seconds(512) == pytest.approx(
        512 * (5632 * 2e-9 - 4 * 3e-6))
    assert "94 graph ops x 0.50 us" in basis and "5,632 elementwise elements x 2.000 ns a token" in basis


def test_decode_attends_over_the_kv_view_llama_cpp_pads_to_256_cells(tmp_path: Path):
    speed, _ = _model(tmp_path, RATES, ctx_size=1000)  # a cache of 1,024 cells
    attention_s = speed.costs.attn_flops(1) / 10e9  # one cell's attention at 10 GFLOP/s
    # positions 0 and 200 both attend 256 cells (measured here: the bundled model decoded at the same
    # rate from depth 0 to 224 and a step slower from 260 to 480)
    assert speed.decode_seconds(0) == pytest.approx(speed.decode_seconds(200))
    assert speed.decode_seconds(300) - speed.decode_seconds(200) == pytest.approx(256 * attention_s)
    assert speed.decode_seconds(999) - speed.decode_seconds(0) == pytest.approx((1024 - 256) * attention_s)
    assert speed.decode_seconds(5000) == pytest.approx(speed.decode_seconds(999))  # never past the cache


def test_a_hostile_header_s_widths_size_no_work_and_its_layer_count_is_bounded(tmp_path: Path):
    info = read_gguf(write_arch_gguf(tmp_path / "gemma2.gguf", replace(ARCH_MODELS["gemma2"], n_vocab=4096)))
    # Widths a header can claim (the ledger refuses the file elsewhere): counted as numbers, never allocated
    # (2**40 elements of anything would not fit this machine), and the ops stay the layers' own.
    huge = replace(info, n_embd=2**40, n_head=2**31, n_head_kv=2**31, head_dim_k=2**20, head_dim_v=2**20)
    work = graph_work(huge)
    assert work.nodes == 6 * LLAMA_LAYER_OPS + LLAMA_OTHER_OPS and work.elements > 2**40
    # More layers than llama.cpp loads (LLAMA_MAX_LAYERS = 512), or none: nothing is counted.
    assert graph_work(replace(info, n_layer=10**9)) == GraphWork(0, 0)
    assert graph_work(replace(info, n_layer=0, n_embd=0)) == GraphWork(0, 0)


@pytest.mark.parametrize("arch", ["granitehybrid", "qwen3next"])
def test_a_prompt_token_updates_every_recurrent_layer_s_whole_state(tmp_path: Path, arch: str):
    # ggml's ssm_scan and gated_delta_net loop over the batch's tokens and update each element of the
    # layer's state for every one of them; they write the state back once a batch
    info = read_gguf(write_recurrent_gguf(tmp_path / f"{arch}.gguf", RECURRENT_MODELS[arch]))
    recurrent = {t.name.split(".")[1] for t in info.tensors if t.name.startswith("blk.") and ".ssm_" in t.name}
    state = info.metadata[f"{arch}.ssm.state_size"] * info.metadata[f"{arch}.ssm.inner_size"]
    assert 0 < len(recurrent) < info.n_layer
    assert len(recurrent) * state < graph_work(info).elements < (len(recurrent) + 1) * state
