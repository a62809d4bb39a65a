"""The speed model: profile speed figures checked with file:line errors, costs per token, the three methods, the probe's solve, bench history."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from gguf_factory import TinyModel, write_tiny_gguf

from workbench.core.bench.device_probe import DEPTH, DeviceProbe, _solve
from workbench.cli.speed_text import rates_line
from workbench.core.bench.probed_profile import probed_profile, write_probed_profile
from workbench.core.config.devices import load_device
from workbench.core.config.preset import DeviceProfile, Preset, ThreadRates
from workbench.core.engine.measured import RatesMeasured
from workbench.core.errors import PresetError
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.speed import SpeedCorrection, predict_speed, speed_model
from workbench.core.ledger.speed_costs import model_costs
from workbench.core.ledger.speed_history import MAX_FILE_BYTES, read_history, record_run, speed_correction

PROFILE_HEAD = 'name = "board"\nram_total_mb = 4096\nmem_bandwidth_gbs = 20\ncores = 4\n'
GOOD_SPEED = "[speed.t1]\ntoken_us = 100\nlayer_us = 10\nread_gbs = { Q8_0 = 10 }\n"


def _profile(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "board.toml"
    path.write_text(PROFILE_HEAD + body, encoding="utf-8")
    return path


def test_profile_speed_tables_load(tmp_path: Path):
    device = load_device(str(_profile(tmp_path, 'effective_bandwidth_gbs = 9.5\neffective_backend = "cuda"\n'
                                                "[speed.t2]\ntoken_us = 80\nlayer_us = 12\nread_gbs = { Q4_K = 9 }\n"
                                                + GOOD_SPEED)))
    assert device.effective_bandwidth_gbs == 9.5 and device.effective_backend == "cuda"
    assert [r.threads for r in device.thread_rates] == [1, 2]  # sorted by thread count
    assert device.thread_rates[0].read_gbs == (("Q8_0", 10.0),) and device.thread_rates[0].kv_read_gbs is None


@pytest.mark.parametrize(("body", "message", "line"), [
    ("[speed.t1]\ntoken_us = -5\nread_gbs = { Q8_0 = 10 }\n", "token_us = -5 is out of range", 6),
    ("[speed.t1]\ntoken_us = nan\nread_gbs = { Q8_0 = 10 }\n", "token_us = nan is out of range", 6),
    ("[speed.t1]\ntokens_us = 5\nread_gbs = { Q8_0 = 10 }\n", 'unknown key "tokens_us"', 6),
    ("[speed.t1]\nrow_ns = 1e12\nread_gbs = { Q8_0 = 10 }\n", "row_ns = 1000000000000.0 is out of range", 6),
    ("[speed.t1]\nnode_us = -0.5\nread_gbs = { Q8_0 = 10 }\n", "node_us = -0.5 is out of range", 6),
    ("[speed.t1]\nprefill_element_ns = inf\nread_gbs = { Q8_0 = 10 }\n", "prefill_element_ns = inf is out of range", 6),
    ("[speed.t1]\nnode_us_range = [0.5, 0.2]\nread_gbs = { Q8_0 = 10 }\n", "node_us_range is not a [lowest, highest]", 6),
    ("[speed.t1]\nread_gbs_range = [1, 2, 3]\nread_gbs = { Q8_0 = 10 }\n", "read_gbs_range is not a [lowest", 6),
    ("[speed.t1]\nread_gbs_range = [-1, 2]\nread_gbs = { Q8_0 = 10 }\n", "read_gbs_range is not a [lowest", 6),
    ("[speed.t1]\nunmapped_read_gbs = 0\nread_gbs = { Q8_0 = 10 }\n", "unmapped_read_gbs = 0 is out of range", 6),
    ("[speed.t1]\nunmapped_read_gbs = 1e9\nread_gbs = { Q8_0 = 10 }\n", "unmapped_read_gbs = 1000000000.0 is out", 6),
    ('[speed.t1]\nunmapped_read_gbs = "fast"\nread_gbs = { Q8_0 = 10 }\n', "unmapped_read_gbs", 6),
    ("[speed.fast]\ntoken_us = 5\n", "[speed.fast] is not a thread count", 5),
    ("[speed.t1]\ntoken_us = 5\nread_gbs = { Q9_9 = 10 }\n", 'names "Q9_9"', 7),
    ("[speed.t1]\ntoken_us = 5\nread_gbs = { Q8_0 = 1e9 }\n", "Q8_0 = 1000000000.0 is out of range", 7),
    ("[speed.t1]\ntoken_us = 5\n[speed.t1.read_gbs]\nQ8_0 = -1\n", "Q8_0 = -1 is out of range", 8),
    ("[speed.t1]\ntoken_us = 5\n", "has no read_gbs", 5),
    ('effective_backend = "metal"\n', 'effective_backend = "metal"', 5),
    ("effective_bandwidth_gbs = 0\n", "effective_bandwidth_gbs = 0 is out of range", 5),
])
def test_bad_speed_figures_name_file_and_line(tmp_path: Path, body: str, message: str, line: int):
    path = _profile(tmp_path, body)
    with pytest.raises(PresetError) as error:
        load_device(str(path))
    assert message in str(error.value)
    assert error.value.where == f"{path}:{line}"


def test_too_many_thread_tables_are_refused(tmp_path: Path):
    body = "".join(f"[speed.t{n}]\ntoken_us = 1\nread_gbs = {{ Q8_0 = 1 }}\n" for n in range(1, 66))
    with pytest.raises(PresetError, match="65 thread tables"):
        load_device(str(_profile(tmp_path, body)))


def test_decode_reads_one_embedding_row_unless_tied(tmp_path: Path):
    untied = read_gguf(write_tiny_gguf(tmp_path / "untied.gguf", TinyModel(n_vocab=4096)))
    tied = read_gguf(write_tiny_gguf(tmp_path / "tied.gguf", TinyModel(n_vocab=4096, output_type=None)))
    embd = next(t for t in untied.tensors if t.name == "token_embd.weight")
    output = next(t for t in untied.tensors if t.name == "output.weight")
    untied_costs, tied_costs = model_costs(untied), model_costs(tied)
    # One Q8_0 row of 256 values is 8 blocks of 34 bytes; the rest of the file is read whole.
    assert untied_costs.decode_bytes_total == untied.weights_bytes - embd.n_bytes + 8 * 34
    # tied: the output layer reads the whole table, and get_rows the token's row of it, as a split counts them
    # (the row on the host, the table where the output layer is)
    assert tied_costs.decode_bytes_total == tied.weights_bytes + 8 * 34
    # a prompt reads the output layer once, and the last layer's feed-forward (it runs for the output row only)
    last_ffn = [t for t in untied.tensors if t.name.startswith(f"blk.{untied.n_layer - 1}.ffn_") and len(t.shape) > 1]
    once = Counter({"F16": output.n_bytes})
    for tensor in last_ffn:
        once[tensor.ggml_type] += tensor.n_bytes
    assert last_ffn and dict(untied_costs.output_bytes) == dict(once)


def test_moe_reads_only_the_used_experts(tmp_path: Path):
    info = read_gguf(write_arch_gguf(tmp_path / "olmoe.gguf", ARCH_MODELS["olmoe"]))
    experts = sum(t.n_bytes for t in info.tensors if "_exps." in t.name)
    embd = next(t for t in info.tensors if t.name == "token_embd.weight")
    costs = model_costs(info)
    row = embd.n_bytes // info.n_vocab
    assert costs.decode_bytes_total == info.weights_bytes - embd.n_bytes + row - experts + experts * 2 // 8
    assert costs.expert_note == "2 of 8 experts per token"
    # Rows a token's mat-vecs compute: per layer Q, K, V and the output of 128 rows each, the router's 8,
    # the 2 used experts' gate, up and down of 128 each; then the 32,768-row output layer.
    assert costs.decode_rows == 4 * (4 * 128 + 8 + 2 * 3 * 128) + 32768


def test_a_token_reads_nothing_of_the_mtp_block(tmp_path: Path):
    from arch_attention_2026 import ATTENTION_MODELS, write_attention_gguf

    model = ATTENTION_MODELS["deepseek32"]
    info = read_gguf(write_attention_gguf(tmp_path / "v32.gguf", model))
    last = f"blk.{model.n_layer - 1}."  # DeepSeek-V3.2's MTP block: loaded for a draft context only
    block = sum(t.n_bytes * (model.n_expert_used if "_exps." in t.name else model.n_expert) // model.n_expert
                for t in info.tensors if t.name.startswith(last))
    assert block > 0
    without_key = replace(info, metadata={key: value for key, value in info.metadata.items()
                                          if not key.endswith("nextn_predict_layers")})
    assert model_costs(info).decode_bytes_total == model_costs(without_key).decode_bytes_total - block
    assert (model_costs(info).n_layer, model_costs(without_key).n_layer) == (4, 5)
    assert model_costs(info).kv_bytes(100) * 5 == model_costs(without_key).kv_bytes(100) * 4


def test_sliding_window_layers_stop_growing_at_their_window(tmp_path: Path):
    info = read_gguf(write_arch_gguf(tmp_path / "gemma3.gguf", replace(ARCH_MODELS["gemma3"], n_vocab=4096)))
    costs = model_costs(info)
    # 8 layers, 1 KV head of 64 (f16 K and V: 256 bytes a position); Gemma 3's pattern of 6 makes
    # layer 5 the one global layer, the other 7 keep a 512-token window.
    assert costs.kv_bytes(100) == 8 * 256 * 100
    assert costs.kv_bytes(4096) == (1 * 4096 + 7 * 512) * 256


def _tiny(tmp_path: Path):
    return read_gguf(write_tiny_gguf(tmp_path / "t.gguf", TinyModel(n_vocab=4096, output_type="Q8_0",
                                                                    layer_types={"attn_q": "Q8_0"})))


RATES = ThreadRates(threads=1, token_us=100, layer_us=10, read_gbs=(("Q8_0", 10.0),), kv_read_gbs=None,
                    prefill_token_us=1, prefill_layer_us=0, prefill_gflops=(("Q8_0", 50.0),))


def test_measured_method_adds_fixed_costs_to_the_reads(tmp_path: Path):
    info = _tiny(tmp_path)
    device = DeviceProfile(name="b", ram_total_mb=4096, mem_bandwidth_gbs=20, thread_rates=(RATES,),
                           notes=(("speed", "probe of the test"),))
    speed, basis = speed_model(info, Preset(name="p", threads=1), device)
    read = speed.costs.decode_bytes_total
    # 100 us + 2 layers x 10 us + the bytes at 10 GB/s (F32 norms take the nearest measured type's rate)
    assert speed.decode_seconds(0) == pytest.approx(120e-6 + read / 10e9)
    assert "probe of the test" in basis and "measured: 100 us per token + 2 layers x 10.0 us" in basis
    rowed = replace(device, thread_rates=(replace(RATES, row_ns=2.0),))
    speed_rows, basis_rows = speed_model(info, Preset(name="p", threads=1), rowed)
    assert speed_rows.decode_seconds(0) == pytest.approx(speed.decode_seconds(0) + speed.costs.decode_rows * 2e-9)
    assert speed.costs.decode_rows > 4096 and f"{speed.costs.decode_rows:,} weight rows x 2.00 ns" in basis_rows
    prediction = predict_speed(info, Preset(name="p", threads=1), device, n_ctx=1024)
    assert prediction.method == "measured" and prediction.band == (0.85, 1.15)
    assert prediction.ttft_ms == pytest.approx(1000 * 512 / prediction.prefill_tps)


def test_the_band_widens_by_what_moved_between_the_probes_passes(tmp_path: Path):
    info = _tiny(tmp_path)
    rates = replace(RATES, threads=2, node_us=0.2)
    device = DeviceProfile(name="b", ram_total_mb=4096, mem_bandwidth_gbs=20, thread_rates=(rates,))
    preset = Preset(name="p", threads=2)
    steady = predict_speed(info, preset, replace(device, thread_rates=(
        replace(rates, node_us_range=(0.2, 0.2), read_gbs_range=(10.0, 10.0)),)), n_ctx=1024)
    assert steady.band == (0.85, 1.15)
    # The passes saw the cost per op up to 0.5 us and the read rate down to 8 GB/s, never better than the figures kept.
    moved = replace(rates, node_us_range=(0.2, 0.5), read_gbs_range=(8.0, 10.0))
    prediction = predict_speed(info, preset, replace(device, thread_rates=(moved,)), n_ctx=1024)
    slowest = predict_speed(info, preset, replace(device, thread_rates=(
        replace(rates, node_us=0.5, read_gbs=(("Q8_0", 8.0),)),)), n_ctx=1024)
    # the low end reaches 15% below what the machine in its slowest state the probe saw would decode
    assert prediction.band[0] * prediction.decode_tps_empty == pytest.approx(0.85 * slowest.decode_tps_empty)
    assert prediction.band[0] < 0.85 * 0.9 and prediction.band[1] == 1.15
    assert "passes at 2 threads: 0.20-0.50 us per graph op, Q8_0 read at 8.0-10.0 GB/s" in prediction.basis
    assert prediction.basis.endswith(f"band x{prediction.band[0]:.2f}-x1.15")
    # A model the cache holds: the cached read rate's range widens the band too (here by itself).
    cached = replace(rates, cache_mb=32.0, cached_read_gbs=(("Q8_0", 40.0),))
    in_cache = predict_speed(info, preset, replace(device, thread_rates=(
        replace(cached, node_us_range=(0.2, 0.2), cached_read_gbs_range=(20.0, 40.0)),)), n_ctx=1024)
    half_rate = predict_speed(info, preset, replace(device, thread_rates=(
        replace(cached, cached_read_gbs=(("Q8_0", 20.0),)),)), n_ctx=1024)
    assert in_cache.band[0] * in_cache.decode_tps_empty == pytest.approx(0.85 * half_rate.decode_tps_empty)
    assert "cached at 20.0-40.0 GB/s" in in_cache.basis


def test_probe_keeps_how_far_its_passes_moved(tmp_path: Path):
    from workbench.core.bench.probe_passes import ProbeRun, median_run, with_ranges

    costs = replace(model_costs(_tiny(tmp_path)), decode_bytes=(("Q8_0", 100_000_000),))
    # Three passes of a Q8_0 read model: 1 ms a token beside its bytes, which were read at 20, 25 and 16 GB/s;
    # the solve kept the pass of the median decode, 20 GB/s.
    passes = [ProbeRun(costs, _run(0, 1e-3 + 100e6 / gbs, 0.01)) for gbs in (20e9, 25e9, 16e9)]
    assert median_run(passes) is passes[0]
    rates = with_ranges(replace(RATES, read_gbs=(("Q8_0", 20.0),)), [0.3, 0.25, 0.42], passes)
    assert rates.node_us_range == (0.25, 0.42)
    assert rates.read_gbs_range == pytest.approx((16.0, 25.0))
    lone = with_ranges(RATES, [0.3], [])
    assert (lone.node_us_range, lone.read_gbs_range, lone.cached_read_gbs_range) == ((0.3, 0.3), (), ())
    # The cached model's passes: 4 MB at 40 GB/s kept, 50 and 32 GB/s in the others, 0.1 ms beside.
    small = replace(costs, decode_bytes=(("Q8_0", 4_000_000),))
    cached = [ProbeRun(small, _run(0, 1e-4 + 4e6 / gbs, 0.01)) for gbs in (32e9, 50e9, 40e9)]
    rates = with_ranges(replace(RATES, cached_read_gbs=(("Q8_0", 40.0),)), [0.3], [], cached)
    assert rates.cached_read_gbs_range == pytest.approx((32.0, 50.0)) and rates.read_gbs_range == ()


def test_weights_the_cache_holds_are_read_at_the_cached_rate_never_below_the_memory_rate(tmp_path: Path):
    info = _tiny(tmp_path)

    def decode_s(cached_gbs: float) -> float:
        rates = replace(RATES, cached_read_gbs=(("Q8_0", cached_gbs),), cache_mb=64.0)
        device = DeviceProfile(name="b", ram_total_mb=4096, mem_bandwidth_gbs=20, thread_rates=(rates,))
        return speed_model(info, Preset(name="p", threads=1), device)[0].decode_seconds(0)

    costs = speed_model(info, Preset(name="p", threads=1), DeviceProfile(
        name="b", ram_total_mb=4096, mem_bandwidth_gbs=20, thread_rates=(RATES,)))[0].costs
    assert costs.decode_bytes_total < 64e6  # the whole model fits the 64 MB cache
    q8 = dict(costs.decode_bytes)["Q8_0"]
    others = costs.decode_bytes_total - q8  # F32 norms: no cached figure, memory's rate of the nearest type
    # Q8_0 from the cache, faster than memory's 10 GB/s
    assert decode_s(40.0) == pytest.approx(120e-6 + q8 / 40e9 + others / 10e9)
    # a probe whose cached figure came out below memory's 10 GB/s measured its own fixed costs: memory's rate
    assert decode_s(4.0) == pytest.approx(120e-6 + costs.decode_bytes_total / 10e9)


def test_mmap_off_reads_weights_from_memory_at_the_probed_unmapped_rate(tmp_path: Path):
    info = _tiny(tmp_path)
    costs = model_costs(info)
    q8 = dict(costs.decode_bytes)["Q8_0"]
    others = costs.decode_bytes_total - q8  # F32 norms, at Q8_0's rate scaled the same way

    def predicted(mmap: bool, unmapped: float | None, cache_mb: float = 0.0):
        rates = replace(RATES, unmapped_read_gbs=unmapped, cache_mb=cache_mb, cached_read_gbs=(("Q8_0", 40.0),))
        device = DeviceProfile(name="b", ram_total_mb=4096, mem_bandwidth_gbs=20, thread_rates=(rates,))
        return speed_model(info, Preset(name="p", threads=1, mmap=mmap), device)

    mapped, mapped_basis = predicted(True, 6.0)
    assert mapped.decode_seconds(0) == pytest.approx(120e-6 + (q8 + others) / 10e9) and "mmap off" not in mapped_basis
    # read into llama.cpp's own memory, probed at 6 of the mapped 10 GB/s: every type at 0.6x its rate
    own, own_basis = predicted(False, 6.0)
    assert own.decode_seconds(0) == pytest.approx(120e-6 + (q8 + others) / 6e9)
    assert "mmap off: read into llama.cpp's own memory, at 0.60x those rates (Q8_0 6.0 GB/s there, probed)" in own_basis
    # a profile probed before the figure existed: the mapped rates, and the basis says what is missing
    old, old_basis = predicted(False, None)
    assert old.decode_seconds(0) == pytest.approx(mapped.decode_seconds(0)) and "whose read rate this profile lacks" in old_basis
    # weights the last-level cache holds are read from it either way
    cached, cached_basis = predicted(False, 6.0, cache_mb=64.0)
    assert cached.decode_seconds(0) == pytest.approx(predicted(True, 6.0, cache_mb=64.0)[0].decode_seconds(0))
    assert "mmap off" not in cached_basis


def test_weights_over_half_the_cache_are_predicted_from_memory_with_the_cache_as_the_band_s_high_end(tmp_path: Path):
    info = _tiny(tmp_path)
    costs = model_costs(info)
    total, rows = costs.decode_bytes_total, costs.decode_rows
    assert rows > 0
    rates = replace(RATES, threads=2, row_ns=5.0, cached_read_gbs=(("Q8_0", 40.0),))

    def predicted(cache_mb: float):
        device = DeviceProfile(name="b", ram_total_mb=4096, mem_bandwidth_gbs=20,
                               thread_rates=(replace(rates, cache_mb=cache_mb),))
        return predict_speed(info, Preset(name="p", threads=2), device, n_ctx=256)

    q8 = dict(costs.decode_bytes)["Q8_0"]
    fixed_s = 120e-6  # 100 us a token + 2 layers x 10 us
    from_cache_s = fixed_s + q8 / 40e9 + (total - q8) / 10e9
    from_memory_s = fixed_s + rows * 5e-9 + total / 10e9
    # A cache of three times the weights holds them: the cached rate, no cost per row, the band as measured.
    roomy = predicted(3 * total / 1e6)
    assert 1 / roomy.decode_tps_empty == pytest.approx(from_cache_s) and roomy.band == (0.85, 1.15)
    assert "last-level cache (under 50% of it) at Q8_0 40.0 GB/s" in roomy.basis and "weight rows" not in roomy.basis
    # Weights that fill two thirds of the cache: predicted from memory; read from the cache is the high end.
    tight = predicted(1.5 * total / 1e6)
    assert 1 / tight.decode_tps_empty == pytest.approx(from_memory_s)
    assert tight.band[1] == pytest.approx(1.15 * from_memory_s / from_cache_s) and tight.band[0] == 0.85
    assert f"{rows:,} weight rows x 5.00 ns" in tight.basis
    assert "widened by the weights" in tight.basis and "predicted from memory: they fill over 50% of it" in tight.basis
    # Weights the cache cannot hold: memory, and the band as measured.
    small = predicted(0.5 * total / 1e6)
    assert 1 / small.decode_tps_empty == pytest.approx(from_memory_s) and small.band == (0.85, 1.15)


def test_other_thread_count_uses_the_nearest_below_and_says_so(tmp_path: Path):
    device = DeviceProfile(name="b", ram_total_mb=4096, thread_rates=(RATES, replace(RATES, threads=4)))
    _, basis = speed_model(_tiny(tmp_path), Preset(name="p", threads=3), device)
    assert "measured at 1 thread; the preset runs 3" in basis


def test_published_and_bound_methods(tmp_path: Path):
    info = _tiny(tmp_path)
    published = DeviceProfile(name="b", ram_total_mb=4096, mem_bandwidth_gbs=40, effective_bandwidth_gbs=10,
                              notes=(("effective_bandwidth_gbs", "a cited run"),))
    speed, basis = speed_model(info, Preset(name="p", threads=2), published)
    assert speed.decode_tps(0) == pytest.approx(10e9 / speed.costs.decode_bytes_total)
    assert speed.prefill_tps(512) is None and "a cited run" in basis and "prefill: unavailable" in basis
    # The published figure is for the CPU; a preset that offloads to the GPU falls back to the bound.
    offload = replace(published, accelerator="cuda")
    speed, basis = speed_model(info, Preset(name="p", threads=2, gpu_layers=-1), offload)
    assert speed.method == "bound" and "published figures are for CPU, this preset runs CUDA" in basis
    assert speed.decode_tps(0) == pytest.approx(40e9 / speed.costs.decode_bytes_total)
    prediction = predict_speed(info, Preset(name="p", threads=2), replace(published, effective_bandwidth_gbs=None),
                               n_ctx=512)
    assert prediction.method == "bound" and prediction.prefill_tps is None and prediction.ttft_ms is None


def test_correction_scales_and_is_named(tmp_path: Path):
    device = DeviceProfile(name="b", ram_total_mb=4096, thread_rates=(RATES,))
    plain = predict_speed(_tiny(tmp_path), Preset(name="p", threads=1), device, n_ctx=512)
    corrected = predict_speed(_tiny(tmp_path), Preset(name="p", threads=1), device, n_ctx=512,
                              correction=SpeedCorrection(0.5, 2.0, 3, "history.json"))
    assert corrected.decode_tps_empty == pytest.approx(plain.decode_tps_empty * 0.5)
    assert corrected.prefill_tps == pytest.approx(plain.prefill_tps * 2.0)
    assert "bench history (3 runs, decode x0.50, prefill x2.00, history.json)" in corrected.basis


def _run(depth: int, decode_s: float, prefill_s: float, n_prompt: int = 256) -> RatesMeasured:
    return RatesMeasured(threads=1, depth=depth, n_prompt=n_prompt, prefill_seconds=prefill_s, n_gen=24,
                         decode_seconds_per_token=decode_s, started_at=0.0, finished_at=1.0)


def test_probe_solve_recovers_known_rates(tmp_path: Path):
    from workbench.core.bench.device_probe import DEEP_CELLS, FLAT_CELLS
    from workbench.core.bench.probe_passes import ProbeRun
    from workbench.core.bench.probe_models import (
        CACHED_MODEL,
        FIXED_COST_MODELS,
        RATE_MODELS,
        read_models,
        rows_model,
        write_probe_model,
    )

    def costs(model):
        return model_costs(read_gguf(write_probe_model(tmp_path / f"{model.name}.gguf", model)))

    # Runs made from chosen truths: 50 us a token and 0.2 us an op of its graph (or, for a graph the
    # solve is not told, 5 us a layer), Q8_0 at 20 GB/s from memory and 40 GB/s from the 32 MB cache,
    # attention at 20 GFLOP/s over the cells llama.cpp attends (256 at depth 0, 1280 at DEPTH) plus,
    # once weights and KV outgrow the cache, the KV at 8 GB/s; prefill 2 us a token and 0.5 ns an
    # elementwise element (or 1 us a layer), 100 GFLOP/s, attention 4 ns per (head, query, cell).
    row_s = 0.0  # the third case below sets a cost per weight row
    per_layer = False  # the last case: graphs unknown, fixed costs per layer

    def decode(c, cells, gbs):
        kv = c.kv_bytes(cells)
        fixed = c.n_layer * 5e-6 if per_layer else c.graph_nodes * 0.2e-6
        from_memory = c.decode_bytes_total > 32e6
        return (50e-6 + fixed + c.decode_bytes_total / gbs + c.attn_flops(cells) / 20e9
                + (kv / 8e9 if c.decode_bytes_total + kv > 32e6 else 0) + (c.decode_rows * row_s if from_memory else 0))

    def prefill(c, depth, n=256):
        cells = depth + n
        fixed = c.n_layer * 1e-6 if per_layer else c.prefill_elements * 0.5e-9
        return (n * (2e-6 + fixed) + sum(f for _, f in c.prefill_flops) * n / 100e9
                + c.layer_positions(cells) * c.n_head * n * 4e-9
                + sum(b for _, b in c.output_bytes) / 20e9)

    small, deep = (costs(m) for m in FIXED_COST_MODELS)
    wide, cached = costs(RATE_MODELS[0]), costs(CACHED_MODEL)
    # 300 MB of RAM: read models of 37.5 MB, more than the 32 MB cache holds
    read, rows = costs(read_models(32.0, 300.0)[0]), costs(rows_model(32.0, 300.0))
    assert min(read.decode_bytes_total, rows.decode_bytes_total) > 32e6
    assert deep.graph_nodes > small.graph_nodes > 0 and deep.prefill_elements > small.prefill_elements > 0

    def runs():  # every probe run, from the truths above
        fixed = [ProbeRun(small, _run(0, decode(small, FLAT_CELLS, 40e9), prefill(small, 0))),
                 ProbeRun(deep, _run(0, decode(deep, FLAT_CELLS, 40e9), prefill(deep, 0)),
                          _run(DEPTH, decode(deep, DEEP_CELLS, 40e9), prefill(deep, DEPTH)))]
        wide_run = ProbeRun(wide, _run(0, decode(wide, FLAT_CELLS, 20e9), prefill(wide, 0)),
                            _run(DEPTH, decode(wide, DEEP_CELLS, 20e9), prefill(wide, DEPTH)))
        cached_run = ProbeRun(cached, _run(0, decode(cached, FLAT_CELLS, 40e9), prefill(cached, 0)))
        decode_only = [ProbeRun(c, _run(0, decode(c, FLAT_CELLS, 15e9), prefill(c, 0, 8), n_prompt=8))
                       for c in (read, rows)]
        return fixed, [("Q8_0", wide_run)], cached_run, decode_only

    fixed, wide_runs, cached_run, (read_run, rows_run) = runs()
    rates = _solve(1, fixed, wide_runs, cached_run, 32.0)
    assert rates.unmapped_read_gbs is None  # no unmapped pass: not measured
    assert rates.token_us == pytest.approx(50, rel=0.02) and rates.node_us == pytest.approx(0.2, rel=0.02)
    assert dict(rates.read_gbs)["Q8_0"] == pytest.approx(20, rel=0.02)
    assert dict(rates.cached_read_gbs)["Q8_0"] == pytest.approx(40, rel=0.02) and rates.cache_mb == 32.0
    assert rates.attn_gflops == pytest.approx(20, rel=0.02) and rates.kv_read_gbs == pytest.approx(8, rel=0.02)
    assert rates.prefill_token_us == pytest.approx(2, rel=0.02)
    assert rates.prefill_element_ns == pytest.approx(0.5, rel=0.02)
    assert dict(rates.prefill_gflops)["Q8_0"] == pytest.approx(100, rel=0.02)
    assert [ns for _, ns in rates.prefill_attn_points] == pytest.approx([4.0, 4.0], rel=0.02)
    # A read model the cache cannot hold, read at 15 GB/s: its rate is memory's, the wide model's prefill stays.
    rates = _solve(1, fixed, wide_runs, cached_run, 32.0, [("Q8_0", read_run)])
    assert dict(rates.read_gbs)["Q8_0"] == pytest.approx(15, rel=0.02)
    assert dict(rates.prefill_gflops)["Q8_0"] == pytest.approx(100, rel=0.02)
    # the same file without mmap, read at 11 GB/s: its own rate, the mapped one stays
    unmapped_run = ProbeRun(read, _run(0, decode(read, FLAT_CELLS, 11e9), prefill(read, 0, 8), n_prompt=8))
    rates = _solve(1, fixed, wide_runs, cached_run, 32.0, [("Q8_0", read_run)], unmapped=unmapped_run)
    assert rates.unmapped_read_gbs == pytest.approx(11, rel=0.02)
    assert dict(rates.read_gbs)["Q8_0"] == pytest.approx(15, rel=0.02)
    assert rates.row_ns == 0  # no rows model: no row cost
    # At 2 threads every decode from memory also costs 3 ns a weight row: the rows model (short rows) and
    # the read model tell it from the read rate, and the fixed costs and the cached rate stay.
    assert rows.decode_rows / rows.decode_bytes_total > 3 * read.decode_rows / read.decode_bytes_total
    row_s = 3e-9
    fixed, wide_runs, cached_run, (read_run, rows_run) = runs()
    assert _solve(1, fixed, wide_runs, cached_run, 32.0, [("Q8_0", read_run)], rows_run).row_ns == 0  # uncontended
    # a last-level cache that holds the rows model (one beyond the vocabulary's cap): no row cost is seen
    assert _solve(2, fixed, wide_runs, cached_run, 1e5, [("Q8_0", read_run)], rows_run).row_ns == 0
    rates = _solve(2, fixed, wide_runs, cached_run, 32.0, [("Q8_0", read_run)], rows_run)
    assert rates.row_ns == pytest.approx(3, rel=0.02)
    assert dict(rates.read_gbs)["Q8_0"] == pytest.approx(15, rel=0.02)
    assert rates.token_us == pytest.approx(50, rel=0.02) and rates.node_us == pytest.approx(0.2, rel=0.02)
    assert dict(rates.cached_read_gbs)["Q8_0"] == pytest.approx(40, rel=0.02)
    # Probe models whose graphs are not known: the fixed costs are per layer, as before graphs were counted.
    row_s, per_layer = 0.0, True
    small, deep = (replace(c, graph_nodes=0, prefill_elements=0) for c in (small, deep))
    fixed, wide_runs, cached_run, _ = runs()
    rates = _solve(1, fixed, wide_runs, cached_run, 32.0)
    assert (rates.node_us, rates.prefill_element_ns) == (0, 0)
    assert rates.token_us == pytest.approx(50, rel=0.02) and rates.layer_us == pytest.approx(5, rel=0.02)
    assert rates.prefill_token_us == pytest.approx(2, rel=0.02) and rates.prefill_layer_us == pytest.approx(1, rel=0.02)
    assert dict(rates.prefill_gflops)["Q8_0"] == pytest.approx(100, rel=0.02)


def test_the_fixed_cost_pass_of_the_median_difference_counts():
    from workbench.core.bench.probe_passes import ProbeRun, median_pass

    small_costs, deep_costs = object(), object()  # carried through untouched
    # (small decode, small prompt, deep decode, deep prompt) of three passes; in the second the machine was
    # slow for both models (the differences stay), in the third only for the deep one's prompt
    passes = [(3.0e-5, 0.0050, 3.1e-4, 0.045), (4.4e-5, 0.0072, 4.6e-4, 0.060), (3.2e-5, 0.0051, 3.0e-4, 0.070)]
    small = [ProbeRun(small_costs, _run(0, d, p)) for d, p, _, _ in passes]
    deep = [ProbeRun(deep_costs, _run(0, d, p), _run(1024, 2 * d, 2 * p)) for _, _, d, p in passes]
    chosen_small, chosen_deep = median_pass(small, deep)
    assert chosen_small.costs is small_costs and chosen_deep.costs is deep_costs
    # decode differences 2.80e-4, 4.16e-4, 2.68e-4: the first pass's is the median, and both models come from it
    assert (chosen_small.flat.decode_seconds_per_token, chosen_deep.flat.decode_seconds_per_token) == (3.0e-5, 3.1e-4)
    assert chosen_deep.deep.decode_seconds_per_token == 6.2e-4
    # prompt differences 0.0400, 0.0528, 0.0649: the second pass's is the median, slow as its two models were
    assert (chosen_small.flat.prefill_seconds, chosen_deep.flat.prefill_seconds) == (0.0072, 0.060)
    assert chosen_deep.deep.prefill_seconds == 0.120 and chosen_deep.deep.depth == 1024
    assert median_pass(small[:1], deep[:1]) == (small[0], deep[0])
    # What the depth added is the median of each pass's own addition, put on the chosen pass: in the first
    # pass the machine slowed between the deep model's two decodes, so its addition (9.0e-4) is no measure.
    deep = [ProbeRun(deep_costs, _run(0, d, p), _run(1024, d + added, p + extra))
            for (_, _, d, p), added, extra in zip(passes, (9.0e-4, 2.0e-4, 2.5e-4), (0.030, 0.020, 0.010))]
    _, chosen_deep = median_pass(small, deep)
    assert chosen_deep.deep.decode_seconds_per_token == pytest.approx(3.1e-4 + 2.5e-4)  # the first's depth 0
    assert chosen_deep.deep.prefill_seconds == pytest.approx(0.060 + 0.020)  # the second's prompt, as above


def test_fixed_cost_passes_are_spread_over_the_probe():
    from workbench.core.bench.probe_models import (
        CACHED_MODEL,
        FIXED_COST_MODELS,
        read_models,
        rows_model,
        unmapped_model,
    )
    from workbench.core.bench.probe_passes import probe_order

    reads, rows = read_models(33.5, 24000), rows_model(33.5, 24000)
    unmapped = unmapped_model(reads[0])
    order = [model.name for model in probe_order(reads, rows, (1, 2))]
    small, deep = (model.name for model in FIXED_COST_MODELS)
    starts = [i for i, name in enumerate(order) if name == small]
    assert len(starts) == 3 and all(order[i + 1] == deep for i in starts)  # timed as a pair, three times
    assert all(later - earlier > 2 for earlier, later in zip(starts, starts[1:]))
    assert starts[0] == 0 and starts[-1] == len(order) - 2
    # the Q8_0 read model, the rows model and the cached model three times, from before the second pass of the
    # pair to its last; each rows pass right beside a Q8_0 read pass; the read model's middle pass among the
    # other read models; the other models once each
    for again in (reads[0].name, rows.name, CACHED_MODEL.name):
        at = [i for i, name in enumerate(order) if name == again]
        assert len(at) == 3 and at[0] < starts[1] and at[2] < starts[2]
    q8 = [i for i, name in enumerate(order) if name == reads[0].name]
    beside = [i for i, name in enumerate(order) if name == rows.name]
    assert all(abs(r - q) == 1 for r, q in zip(beside, q8))
    # the same file loaded without mmap three times, each right beside a mapped pass, on the other side from rows
    no_mmap = [i for i, name in enumerate(order) if name == unmapped.name]
    assert len(no_mmap) == 3 and all(abs(u - q) == 1 for u, q in zip(no_mmap, q8))
    assert not set(no_mmap) & set(beside) and unmapped.file_name == reads[0].name and not unmapped.mapped
    assert starts[1] < q8[1] < order.index(reads[1].name) < order.index(reads[-1].name) < q8[2]
    others = [name for name in order
              if name not in (small, deep, reads[0].name, rows.name, CACHED_MODEL.name, unmapped.name)]
    assert sorted(others) == sorted(set(others)) and reads[1].name in others
    # one thread only: no rows model (its row cost is fitted at 2 threads or more), the rest in the same order
    assert [model.name for model in probe_order(reads, rows, (1,))] == [name for name in order if name != rows.name]


def test_read_models_outgrow_the_cache_within_the_ram():
    from workbench.core.bench.probe_models import read_model_mb

    assert read_model_mb(33.5, 24000) == pytest.approx(134)  # 4 x a 33.5 MB last-level cache
    assert read_model_mb(2.0, 8000) == 64  # a Pi 5's 2 MB: the floor, so fixed costs do not show
    assert read_model_mb(64.0, 1024) == 128  # 1 GB of RAM: an eighth of it, not 256 MB
    assert read_model_mb(512.0, 0) == 1024  # a huge cache: the cap
    assert read_model_mb(0.0, 24000) == 256  # no cache in sysfs


def test_the_rows_model_is_a_vocabulary_of_short_rows_beyond_the_cache(tmp_path: Path):
    from workbench.core.bench.probe_models import ROWS_VOCAB_CAP, rows_model, write_probe_model

    model = rows_model(16.0, 300.0)  # a 16 MB cache; 300 MB of RAM caps it at 37.5 MB, quick to write
    costs = model_costs(read_gguf(write_probe_model(tmp_path / "rows.gguf", model)))
    assert costs.decode_bytes_total > 2 * 16e6  # read from memory, not the last-level cache
    # nearly every byte a token reads is a 128-wide row of the output matrix (136 bytes in Q8_0)
    assert costs.decode_rows == pytest.approx(costs.decode_bytes_total / 136, rel=0.01)
    # a huge cache (1.1 GB, as on a server part with stacked cache): the vocabulary stops at its cap
    uncapped = 1024e6 / 136  # twice that cache, held to the read models' 1 GB cap, in 136-byte rows: 7.5 million
    assert rows_model(1152.0, 1e6).n_vocab == ROWS_VOCAB_CAP < uncapped


def test_read_models_are_written_at_least_that_large(tmp_path: Path):
    from workbench.core.bench.probe_models import read_models, write_probe_model

    models = read_models(32.0, 160.0)  # 160 MB of RAM: 20 MB models
    assert [m.weight_type for m in models] == ["Q8_0", "Q4_1", "Q4_K", "Q6_K"]
    for model in models[:2]:
        info = read_gguf(write_probe_model(tmp_path / f"{model.name}.gguf", model))
        decode = model_costs(info).decode_bytes_total
        assert 20e6 <= decode < 20e6 + 4.5e6  # at least 20 MB, within one 512 x 2048 layer (4.5 MB at Q8_0) of it


def test_quiet_run_measures_again_while_others_use_the_cpus(monkeypatch: pytest.MonkeyPatch):
    from workbench.core.bench import quiet_runs

    assert quiet_runs.cpu_others((1000, 300), (1400, 500), 1.0) == pytest.approx(200 / os.sysconf("SC_CLK_TCK"))
    assert quiet_runs.cpu_others(None, (1, 1), 1.0) == 0.0
    # Readings (every CPU's busy ticks, this process's): 2 s of others' ticks, then none, then 1 s.
    readings = iter([(0, 0), (300, 100), (300, 100), (400, 200), (400, 200), (500, 200)])
    monkeypatch.setattr(quiet_runs, "_cpu_ticks", lambda: next(readings))
    times = iter([0.0, 10.0, 10.0, 20.0, 20.0, 30.0])
    made = iter([_run(0, 3e-3, 1.0), _run(0, 2e-3, 1.0), _run(0, 1e-3, 1.0)])
    run, others = quiet_runs.quiet_run(lambda: next(made), clock=lambda: next(times))
    assert run.decode_seconds_per_token == 2e-3 and others == 0.0  # the second run was quiet: no third


def test_quiet_run_measures_again_a_run_whose_tokens_were_unsteady(monkeypatch: pytest.MonkeyPatch):
    from workbench.core.bench import quiet_runs

    monkeypatch.setattr(quiet_runs, "_cpu_ticks", lambda: (0, 0))  # no other process ever runs

    def made(median_ms: float, fastest_ms: float) -> RatesMeasured:
        return replace(_run(0, median_ms / 1e3, 1.0), decode_best_seconds_per_token=fastest_ms / 1e3)

    # The median token 1.43x the fastest (slowed for part of the run), then 1.1x: the second is kept.
    runs = iter([made(18.9, 13.2), made(14.5, 13.2), made(13.3, 13.2)])
    run, _ = quiet_runs.quiet_run(lambda: next(runs))
    assert run.decode_seconds_per_token == pytest.approx(14.5e-3)
    # Every run unsteady: the steadiest of the three.
    runs = iter([made(20, 10), made(16, 10), made(19, 10)])
    assert quiet_runs.quiet_run(lambda: next(runs))[0].decode_seconds_per_token == pytest.approx(16e-3)
    # A retry budget of 5 s: the first retry takes 6 s (it is measured, and spends the budget), so the third
    # run is never measured and the steadier of two is kept, counted as kept disturbed.
    budget = quiet_runs.RetryBudget(5.0)
    runs = iter([made(20, 10), made(16, 10), made(13, 10)])
    times = iter([0.0, 1.0, 1.0, 2.0, 7.0, 7.0])  # the first run's start and end; the retry's start, its run's, both ends
    run, _ = quiet_runs.quiet_run(lambda: next(runs), clock=lambda: next(times), budget=budget)
    assert run.decode_seconds_per_token == pytest.approx(16e-3)
    assert budget.seconds == pytest.approx(0.0 - 1.0) and budget.kept_disturbed == 1
    # spent: a later disturbed run is kept as first measured, and a steady one is not counted
    runs = iter([made(20, 10), made(11, 10)])
    assert quiet_runs.quiet_run(lambda: next(runs), budget=budget)[0].decode_seconds_per_token == pytest.approx(20e-3)
    assert budget.kept_disturbed == 2
    assert quiet_runs.quiet_run(lambda: next(runs), budget=budget)[0].decode_seconds_per_token == pytest.approx(11e-3)
    assert budget.kept_disturbed == 2


def test_last_level_cache_is_read_from_sysfs_and_bounded(tmp_path: Path):
    from workbench.core.bench.device_probe import last_level_cache_mb

    base = tmp_path / "sys/devices/system/cpu/cpu0/cache"
    for index, (level, size) in enumerate(((1, "64K"), (2, "512K"), (3, "3072K"))):
        (base / f"index{index}").mkdir(parents=True)
        (base / f"index{index}" / "level").write_text(f"{level}\n")
        (base / f"index{index}" / "size").write_text(f"{size}\n")
    assert last_level_cache_mb(str(tmp_path)) == pytest.approx(3072 * 1024 / 1e6)
    (base / "index2" / "size").write_text("99999999M\n")  # absurd: not a cache any CPU has
    assert last_level_cache_mb(str(tmp_path)) == 0.0
    assert last_level_cache_mb(str(tmp_path / "nothing")) == 0.0


def test_probed_profile_loads_back(tmp_path: Path):
    host = DeviceProfile(name="host", ram_total_mb=8192, reserves_mb=(("os", 500),), mem_bandwidth_gbs=30, cores=4,
                         notes=(("ram_total_mb", "psutil"), ("power_limit_w", "not detected")))
    rates = replace(RATES, row_ns=2.5, node_us_range=(0.24, 0.45), read_gbs_range=(18.8, 23.7),
                    cached_read_gbs_range=(30.5, 35.0), unmapped_read_gbs=7.5)
    probe = DeviceProbe(rates=(rates,), runs=(), llama_cpp="0.3.36", measured_at="2026-12-02T00:00:00+00:00",
                        seconds=20.0)
    assert probed_profile(probe, host, "my-box")["speed"]["t1"]["read_gbs"] == {"Q8_0": 10.0}
    device = load_device(str(write_probed_profile(probe, host, "my-box", tmp_path)))
    assert device.name == "my-box" and device.thread_rates == (rates,)
    assert rates_line(device.thread_rates[0]).endswith(
        "read GB/s Q8_0 10.0 (Q8_0 7.5 from llama.cpp's own memory: mmap off, RPC nodes) (between the probe's "
        "passes: 0.24-0.45 us/graph op, Q8_0 read 18.8-23.7 GB/s, cached 30.5-35.0 GB/s)")
    assert "measured by `workbench devices probe`" in dict(device.notes)["speed"]
    assert "kept disturbed" not in probe.method
    assert "and 2 runs were kept disturbed once the 8 s were spent;" in replace(probe, kept_disturbed=2).method


def test_bench_history_is_bounded_and_validated(tmp_path: Path):
    path = tmp_path / "speed_history.json"
    assert speed_correction("board", path) is None  # no file: no correction
    for ratio in (0.8, 0.9, 1.0):
        record_run("board", ratio, None, path)
    record_run("board", 99.0, None, path)  # out of bounds: not kept
    correction = speed_correction("board", path)
    assert correction.decode_ratio == pytest.approx(0.9) and correction.prefill_ratio is None
    assert correction.runs == 3 and correction.source == str(path)
    path.write_text(json.dumps({"devices": {"board": {"decode": [0.5, "x", True, 1e9, float("nan")]},
                                            "other": "not a table"}}), encoding="utf-8")
    assert read_history(path) == {"board": {"decode": [0.5], "prefill": []}}
    path.write_text("{not json", encoding="utf-8")
    assert read_history(path) == {}
    path.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    assert read_history(path) == {}


def test_ledger_json_has_the_speed_keys_for_every_device(cli):
    from workbench.core.config.devices import device_catalog

    for device in [d.name for d in device_catalog().entries] + ["host"]:
        code, out, err = cli("ledger", "bundled", "--preset", "as-is", "--device", device, "--json")
        assert code == 0, err
        data = json.loads(out)
        assert set(data["predicted_decode_tps"]) == {"empty_context", "full_context"}
        assert data["predicted_decode_tps"]["empty_context"] > 0
        assert "predicted_prefill_tps" in data and "predicted_ttft_ms" in data
        assert data["speed_basis"]
    code, out, _ = cli("ledger", "bundled", "--preset", "as-is", "--device", "raspberry-pi-5-8gb")
    assert "predicted (published" in out and "geerlingguy/ai-benchmarks" in out


def test_bench_rows_carry_predicted_beside_measured_and_feed_the_history(tmp_path: Path):
    from test_bench_report import _row

    from workbench.core.bench.report import render
    from workbench.core.bench.speed_rows import with_speed_prediction

    info = _tiny(tmp_path)
    device = DeviceProfile(name="pi5", ram_total_mb=8192, thread_rates=(replace(RATES, threads=3),))
    speed, _ = speed_model(info, Preset(name="p", threads=3), device)
    expected = speed.decode_tps(256 + 64)  # the row's test: pp256, then tg128 over a growing cache
    row = with_speed_prediction(_row("q8", 100, expected * 0.8, None), info, Preset(name="p"), device)
    assert row.predicted_decode_tps == pytest.approx(expected)
    assert row.decode_vs_predicted == pytest.approx(0.8)
    assert row.prefill_vs_predicted == pytest.approx(900.0 / row.predicted_prefill_tps)
    assert speed_correction("pi5").decode_ratio == pytest.approx(0.8)
    # The next prediction for this device is corrected by its history, and says so.
    again = with_speed_prediction(_row("q8", 100, expected * 0.8, None), info, Preset(name="p"), device,
                                  remember=False)
    assert again.decode_vs_predicted == pytest.approx(1.0) and "bench history (1 runs" in again.speed_basis
    table = render(_results_with(row), "md")
    assert "decode meas/pred" in table and "0.80" in table


def _results_with(row):
    from test_bench_report import _machine

    from workbench.core.bench.report import BenchResults

    return BenchResults(_machine("pi (pi5)"), (row,))


def test_devices_probe_refuses_bad_arguments_before_measuring(cli):
    code, _, err = cli("devices", "probe", "--threads", "1,x")
    assert code == 2 and "--threads '1,x' is not a list of numbers" in err
    code, _, err = cli("devices", "probe", "--threads", "0")
    assert code == 2 and "use 1 to 16 counts from 1 to 4096" in err
    code, _, err = cli("devices", "probe", "--name", "host")
    assert code == 2 and "is not a profile name" in err
    code, _, err = cli("devices", "probe", "--cpu-cores", "7-4")
    assert code == 2 and "--cpu-cores '7-4'" in err and "runs backwards" in err


def test_devices_show_gives_the_effective_figures_with_their_source(cli):
    code, out, _ = cli("devices", "show", "rk3588-8gb")
    assert code == 0 and "effective_bandwidth_gbs  14 GB/s (CPU)" in out and "llama.cpp/issues/7176" in out
    code, out, _ = cli("devices", "show", "rk3588-8gb", "--json")
    data = json.loads(out)
    assert data["effective_bandwidth_gbs"] == 14 and data["effective_gflops"] is None and data["speed"] == {}


def test_the_host_takes_this_machines_probed_figures():
    from workbench.core.config.devices import user_devices_dir
    from workbench.core.config.host import probed_profile_name

    assert load_device("host").thread_rates == ()  # nothing probed yet: the bound, marked as such
    host = DeviceProfile(name="host", ram_total_mb=8192, reserves_mb=(("os", 500),), mem_bandwidth_gbs=30, cores=4)
    probe = DeviceProbe(rates=(RATES,), runs=(), llama_cpp="0.3.36", measured_at="2026-12-02T00:00:00+00:00",
                        seconds=20.0)
    write_probed_profile(probe, host, probed_profile_name(), user_devices_dir())
    detected = load_device("host")
    assert detected.thread_rates == (RATES,) and detected.name == "host"
    assert "measured by `workbench devices probe`" in dict(detected.notes)["speed"]
    (user_devices_dir() / f"{probed_profile_name()}.toml").write_text("name = 3\n", encoding="utf-8")
    assert load_device("host").thread_rates == ()  # a broken probe file is left out, not fatal
