"""The ledger on deepseek2 (MLA), deepseek32 and glm-dsa (MLA + the DSA indexer's key cache), gemma3n (window +
shared caches + per-layer inputs) and gpt-oss (MXFP4 experts, CPU_REPACK) against what llama.cpp reports when the
real engine loads tiny files of each; inspect's lines for them; the one line a load says when a buffer is off its
prediction."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gguf
import pytest
from arch_attention_2026 import ATTENTION_MODELS, GEMMA3N_KV_LAYERS, write_attention_gguf
from cli_runner import run_cli
from real_engine import ROOMY

from workbench.core.config.cpu_features import CpuFeatures, parse_cpuinfo
from workbench.core.config.devices import load_device
from workbench.core.config.preset import Preset
from workbench.core.engine.client import EngineClient
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.buffer_check import mismatch_line
from workbench.core.ledger.cpu_repack import predicted_repack
from workbench.core.ledger.predict import predict_ledger

MIB = 1024 * 1024
LOG_ROUNDING = 0.006 * MIB  # llama.cpp prints each buffer in MiB to two decimals
ARCHS = sorted(ATTENTION_MODELS)

# ctx 2048 and 8192; f16 without flash attention and q8_0 K/V with it; 1 and 4 sequences (preset parallel)
SETTINGS = [
    Preset(f"ctx{ctx}-{kv}-np{n_seq}", ctx_size=ctx, batch_size=512, ubatch_size=512, cache_type_k=kv,
           cache_type_v=kv, flash_attn=kv != "f16", parallel=n_seq, threads=1)
    for ctx in (2048, 8192) for kv in ("f16", "q8_0") for n_seq in (1, 4)
]


def within(predicted: int, reported: int, share: float = 0.02) -> bool:
    return abs(predicted - reported) <= share * reported + LOG_ROUNDING


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("attention")
    return {arch: write_attention_gguf(folder / f"{arch}.gguf", model) for arch, model in ATTENTION_MODELS.items()}


@pytest.fixture(scope="module")
def client():
    with EngineClient() as engine:
        yield engine


@pytest.mark.parametrize("preset", SETTINGS, ids=[p.name for p in SETTINGS])
@pytest.mark.parametrize("arch", ARCHS)
def test_weights_kv_and_compute_within_two_percent_of_llama_cpp(models, client, arch, preset):
    loaded = client.load_blocking(models[arch], preset, device=ROOMY)
    ledger = predict_ledger(read_gguf(models[arch]), preset, ROOMY)
    weights = ledger.weights_bytes + ledger.cpu_repack_bytes
    report = (f"{arch}/{preset.name}: predicted weights {weights / MIB:.3f} KV {ledger.kv_bytes / MIB:.3f} compute "
              f"{ledger.compute_bytes / MIB:.3f}; llama.cpp {loaded.model_buffer_bytes / MIB:.3f} "
              f"{loaded.kv_buffer_bytes / MIB:.3f} {loaded.compute_buffer_bytes / MIB:.3f} MiB")
    assert loaded.n_ctx == ledger.ctx_size, report
    assert within(weights, loaded.model_buffer_bytes), report
    assert within(ledger.kv_bytes, loaded.kv_buffer_bytes), report
    assert within(ledger.compute_bytes, loaded.compute_buffer_bytes), report
    assert loaded.prediction_check == "", report  # nothing to say when every buffer agrees


F16_PLAIN = Preset("f16", ctx_size=2048, batch_size=512, ubatch_size=512, threads=1)


def test_mla_keeps_the_latent_and_no_v(models, client):
    """deepseek2 with key_length_mla: each layer caches kv_lora_rank + rope values per cell, nothing for V."""
    model = ATTENTION_MODELS["deepseek2"]
    loaded = client.load_blocking(models["deepseek2"], F16_PLAIN, device=ROOMY)
    by_hand = model.n_layer * 2048 * (model.kv_lora_rank + model.rope_dim) * 2  # f16 K only
    assert abs(loaded.kv_buffer_bytes - by_hand) <= LOG_ROUNDING
    # what the ledger counted before MLA: heads x (K + V) = 160 + 128 values a cell, 80% more
    assert predict_ledger(read_gguf(models["deepseek2"]), F16_PLAIN, ROOMY).kv_bytes == by_hand


def _dsa_by_hand(model, cells: int, indexer_layers: int, bytes_per_value: float) -> int:
    """MLA's latent (kv_lora_rank + rope) on every trunk layer (not the MTP blocks) plus the indexer's keys on
    `indexer_layers`, K only."""
    trunk = model.n_layer - model.mtp_layers
    values = cells * (trunk * (model.kv_lora_rank + model.rope_dim) + indexer_layers * model.indexer_dim)
    return int(values * bytes_per_value)


Q8_0_FLASH = Preset("q8_0-fa", ctx_size=2048, batch_size=512, ubatch_size=512, cache_type_k="q8_0",
                    cache_type_v="q8_0", flash_attn=True, threads=1)


def test_dsa_keeps_the_indexer_keys_beside_the_latent_in_the_k_type(models, client):
    """deepseek32: a second cache of indexer key_length values per cell on every trunk layer, f16 or q8_0 as K,
    no V; its MTP block (the fifth) keeps no cache in the main context."""
    model = ATTENTION_MODELS["deepseek32"]
    assert model.mtp_layers == 1
    for preset, bytes_per_value in ((F16_PLAIN, 2), (Q8_0_FLASH, 34 / 32)):  # q8_0: 34 bytes a block of 32
        loaded = client.load_blocking(models["deepseek32"], preset, device=ROOMY)
        by_hand = _dsa_by_hand(model, 2048, model.n_layer - model.mtp_layers, bytes_per_value)
        assert abs(loaded.kv_buffer_bytes - by_hand) <= 2 * LOG_ROUNDING  # two buffers: the latent and the indexer
        ledger = predict_ledger(read_gguf(models["deepseek32"]), preset, ROOMY)
        assert ledger.kv_bytes == by_hand
        # what one more token adds, as the KV panel and the fit's explanation show it: llama.cpp's buffer per cell
        assert ledger.kv_bytes_per_token * loaded.n_ctx == pytest.approx(loaded.kv_buffer_bytes, rel=0.01)


def test_glm_dsa_keeps_indexer_keys_only_on_its_full_layers(models, client):
    model = ATTENTION_MODELS["glm-dsa"]
    loaded = client.load_blocking(models["glm-dsa"], F16_PLAIN, device=ROOMY)
    by_hand = _dsa_by_hand(model, 2048, sum(model.indexer_types), 2)
    assert sum(model.indexer_types) == 4 and abs(loaded.kv_buffer_bytes - by_hand) <= 2 * LOG_ROUNDING
    ledger = predict_ledger(read_gguf(models["glm-dsa"]), F16_PLAIN, ROOMY)
    assert ledger.kv_bytes == by_hand
    assert ledger.kv_bytes_per_token * loaded.n_ctx == pytest.approx(loaded.kv_buffer_bytes, rel=0.01)


@pytest.mark.parametrize(("n_ctx_train", "indexer_layers"), [(16384, 8), (1048576, 4)])
def test_a_glm_dsa_file_without_indexer_types_gets_glm_5_2s_layout_from_a_million_tokens(
        client, tmp_path, n_ctx_train, indexer_layers):
    """No indexer.types key (the GLM-5/5.1/5.2 files): every layer keeps keys below a 1M training context, and
    from it llama.cpp assumes GLM-5.2's layers 0, 1, 2, 6, ... (every fourth from 2)."""
    model = dataclasses.replace(ATTENTION_MODELS["glm-dsa"], indexer_types=(), n_ctx_train=n_ctx_train)
    path = write_attention_gguf(tmp_path / "glm-dsa-untyped.gguf", model)
    loaded = client.load_blocking(path, F16_PLAIN, device=ROOMY)
    by_hand = _dsa_by_hand(model, 2048, indexer_layers, 2)
    assert abs(loaded.kv_buffer_bytes - by_hand) <= 2 * LOG_ROUNDING
    assert predict_ledger(read_gguf(path), F16_PLAIN, ROOMY).kv_bytes == by_hand


def test_the_dsa_files_use_llama_cpps_own_tensor_names(models):
    """Every tensor the deepseek32 and glm-dsa writers emit is in gguf-py's list for glm-dsa (deepseek32 has the same
    names and no list of its own in gguf-py 0.19)."""
    names = gguf.MODEL_TENSORS[gguf.MODEL_ARCH.GLM_DSA]
    allowed = {gguf.TENSOR_NAMES[t].format(bid=il) for t in names for il in range(8)}
    for arch in ("deepseek32", "glm-dsa"):
        written = {t.name.rsplit(".", 1)[0] for t in read_gguf(models[arch]).tensors}
        assert written <= allowed, written - allowed
        assert any(".indexer." in name for name in written)


def test_gemma3n_caches_only_its_first_twenty_layers_with_a_window(models, client):
    model = ATTENTION_MODELS["gemma3n"]
    loaded = client.load_blocking(models["gemma3n"], F16_PLAIN, device=ROOMY)
    owning = range(GEMMA3N_KV_LAYERS)
    global_layers = [il for il in owning if il % 5 == 4]  # pattern of 5: every fifth layer sees the whole context
    window_cells = 1024  # the 512-token window + a 512 ubatch, padded to 256
    cell = model.n_head_kv * model.head_dim * 2 * 2  # f16 K and V
    by_hand = cell * (len(global_layers) * 2048 + (len(owning) - len(global_layers)) * window_cells)
    assert abs(loaded.kv_buffer_bytes - by_hand) <= 2 * LOG_ROUNDING  # two buffers: the window and the global cache
    assert predict_ledger(read_gguf(models["gemma3n"]), F16_PLAIN, ROOMY).kv_bytes == by_hand


def test_gpt_oss_mxfp4_experts_get_a_repacked_copy_on_this_cpu(models, client):
    """On an x86 CPU with AVX2 (this machine, CI) ggml-cpu repacks the MXFP4 experts and nothing else of this file."""
    info = read_gguf(models["gpt-oss"])
    loaded = client.load_blocking(models["gpt-oss"], F16_PLAIN, device=ROOMY)
    mxfp4 = sum(t.n_bytes for t in info.tensors if t.ggml_type == "MXFP4")
    assert mxfp4 > 0.1 * info.weights_bytes
    assert abs(loaded.model_buffer_bytes - (info.weights_bytes + mxfp4)) <= 2 * LOG_ROUNDING  # CPU_Mapped + CPU_REPACK
    ledger = predict_ledger(info, F16_PLAIN, ROOMY)
    assert ledger.cpu_repack_bytes == mxfp4 and "MXFP4" in ledger.cpu_repack_source
    assert ledger.resident.after_load_bytes >= ledger.overhead_bytes + info.weights_bytes + mxfp4


def test_a_board_profiles_cpu_features_choose_what_is_repacked(models):
    info = read_gguf(models["gpt-oss"])
    board = load_device("rk3588-8gb")  # Cortex-A76: NEON with dot product, no i8mm
    assert board.cpu_features == ("neon", "dotprod")
    arm = CpuFeatures(frozenset(board.cpu_features), "rk3588-8gb")
    # repack.cpp on NEON + dotprod: MXFP4 and Q8_0 matrices with a multiple of 4 rows; token_embd is a lookup
    expected = sum(t.n_bytes for t in info.tensors if t.ggml_type in ("MXFP4", "Q8_0") and t.name != "token_embd.weight")
    assert predicted_repack(info, "keep", arm).n_bytes == expected
    assert predicted_repack(info, "keep", CpuFeatures(frozenset({"avx2"}), "n100")).n_bytes == sum(
        t.n_bytes for t in info.tensors if t.ggml_type == "MXFP4")
    assert predicted_repack(info, "keep", CpuFeatures(frozenset(), "none")).n_bytes == 0
    assert parse_cpuinfo("processor : 0\nFeatures : fp asimd evtstrm aes asimddp\n") == {"neon", "dotprod"}
    assert parse_cpuinfo("flags : fpu sse2 avx avx2 fma avx512f\n") == {"avx2", "avx512"}


def test_inspect_names_mla_the_dsa_indexer_the_window_and_the_shared_caches(models):
    mla = run_cli("inspect", str(models["deepseek2"]))
    assert mla.returncode == 0, mla.stderr
    assert "MLA" in mla.stdout and "no V" in mla.stdout and "head dim K 160 / V 128" not in mla.stdout
    dsa = run_cli("inspect", str(models["glm-dsa"]))
    assert "DSA lightning indexer: a second cache of 64 key values per cell on 4 of 8 layers" in dsa.stdout
    assert "glm-dsa.attention.indexer.types" in dsa.stdout and "MLA" in dsa.stdout
    assert "indexer" not in mla.stdout
    gemma = run_cli("inspect", str(models["gemma3n"]))
    assert "512 tokens on 20 of 25 layers" in gemma.stdout
    assert "layers 0-19 own a KV cache; the last 5 reuse one of theirs" in gemma.stdout
    v32 = run_cli("inspect", str(models["deepseek32"]))
    assert "the last 1 of 5 (deepseek32.nextn_predict_layers)" in v32.stdout, v32.stdout
    assert "on every layer" in v32.stdout  # the indexer: every trunk layer
    assert "MTP" not in dsa.stdout


# deepseek32 without flash attention at ctx 8192 with a router gating the replay does not lay out (SOFTMAX_WEIGHT,
# which no released DSA file uses): the formula's compute line leaves out the indexer's scores, ~31% low
DSA_MISSED = Preset("f16-ctx8192", ctx_size=8192, threads=1)
UNLAID_GATING = dataclasses.replace(ATTENTION_MODELS["deepseek32"], gating=3)


def test_a_load_whose_buffer_is_off_says_so_in_one_line(models, client, tmp_path):
    path = write_attention_gguf(tmp_path / "deepseek32-softmax-weight.gguf", UNLAID_GATING)
    loaded = client.load_blocking(path, DSA_MISSED, device=ROOMY)
    assert loaded.prediction_check.startswith("llama.cpp's buffers differ from the ledger by more than 5%: compute ")
    assert f"{loaded.compute_buffer_bytes / MIB:,.1f} MiB reported" in loaded.prediction_check
    assert "\n" not in loaded.prediction_check and "KV" not in loaded.prediction_check
    assert "weights" not in loaded.prediction_check
    errors = dict(loaded.prediction_errors_pct)
    assert errors["compute"] > 5 and abs(errors["KV"]) < 2 and abs(errors["weights"]) < 2
    # the same line in workbench chat, right under llama.cpp's buffers
    preset = tmp_path / "missed.toml"
    preset.write_text('name = "missed"\nweights = "keep"\nctx_size = 8192\nthreads = 1\n')
    chat = run_cli("chat", str(path), "--preset", str(preset), "--no-stats", stdin="/bye\n")
    lines = (chat.stdout + chat.stderr).splitlines()
    said = [line for line in lines if "differ from the ledger" in line]
    assert len(said) == 1 and "compute" in said[0], lines


def test_a_board_simulated_here_is_checked_against_this_machines_repacked_copy(models, client):
    """A profile that states no CPU features predicts no repacked copy for the board; llama.cpp makes one here
    (MXFP4 on AVX2), and the load is checked against what this machine lays out, so nothing is said."""
    bare = dataclasses.replace(ROOMY, cpu_features=())
    assert predict_ledger(read_gguf(models["gpt-oss"]), F16_PLAIN, bare).cpu_repack_bytes == 0
    loaded = client.load_blocking(models["gpt-oss"], F16_PLAIN, device=bare)
    assert loaded.model_buffer_bytes > predict_ledger(read_gguf(models["gpt-oss"]), F16_PLAIN, bare).weights_bytes * 1.05
    assert loaded.prediction_check == ""


def test_the_mismatch_line_names_each_buffer_off_with_both_figures():
    predicted = (("weights", 100 * MIB), ("KV", 6 * MIB), ("RS", 0), ("compute", 14 * MIB))
    line = mismatch_line(predicted, {"weights": 101 * MIB, "KV": 12 * MIB, "compute": 57 * MIB})
    assert line == ("llama.cpp's buffers differ from the ledger by more than 5%: KV 12.0 MiB reported vs 6.0 MiB "
                    "predicted (+100%); compute 57.0 MiB reported vs 14.0 MiB predicted (+307%)")
    assert mismatch_line(predicted, {"weights": 104 * MIB, "KV": 6 * MIB, "compute": 14 * MIB}) == ""


@pytest.mark.parametrize("value", [10**12, 5, 0, True, "1", -1])
def test_a_hostile_mtp_count_leaves_every_layer_cached(models, value):
    """nextn_predict_layers that llama.cpp refuses (more blocks than the file has, a whole model of them) or
    that is not a count changes nothing: every layer keeps its cache, as without the key."""
    from workbench.core.ledger.mtp import mtp_layers

    info = read_gguf(models["deepseek32"])
    assert mtp_layers(info) == 1
    hostile = dataclasses.replace(info, metadata={**info.metadata, "deepseek32.nextn_predict_layers": value})
    assert mtp_layers(hostile) == 0
    plain = predict_ledger(hostile, F16_PLAIN, ROOMY)
    assert plain.kv_bytes == _dsa_by_hand(dataclasses.replace(ATTENTION_MODELS["deepseek32"], mtp_layers=0), 2048,
                                          5, 2)


def test_the_mtp_block_is_in_the_mapped_weights_and_unread_without_mmap(models, client):
    """llama.cpp skips loading the MTP block's tensors: with mmap they are inside the range it maps and
    prefetches, without it they are never read."""
    info = read_gguf(models["deepseek32"])
    block = sum(t.n_bytes for t in info.tensors if t.name.startswith(f"blk.{info.n_layer - 1}."))
    weights = {}
    for mmap in (True, False):
        preset = dataclasses.replace(F16_PLAIN, name=f"mmap-{mmap}", mmap=mmap)
        loaded = client.load_blocking(models["deepseek32"], preset, device=ROOMY)
        weights[mmap] = predict_ledger(info, preset, ROOMY).weights_bytes
        assert abs(loaded.model_buffer_bytes - weights[mmap]) <= LOG_ROUNDING, (mmap, loaded.model_buffer_bytes)
    assert weights[True] - weights[False] == block > 0
