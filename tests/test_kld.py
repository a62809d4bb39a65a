"""KL divergence from the full-precision reference: the maths by hand, the outlier flag, and the real engine."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from workbench.core.bench.kld import GONE_WRONG, KldConfig, KldFinished, KldRow, flag_outliers, run_kld
from workbench.core.engine.kld_math import KldAccumulator, compress_log_probs, expand_log_probs
from workbench.core.bench.sweep import shipped_eval_text
from workbench.core.config.devices import load_device
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset


def test_kld_of_two_hand_made_distributions():
    # p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4): KL(p||q) = 1/2 ln 2 + 1/4 ln(1/2) + 0 = ln(2)/4
    base = np.log(np.array([[0.5, 0.25, 0.25]]))
    measured = np.log(np.array([[0.25, 0.5, 0.25]])) + 3.0  # logits: any offset, the softmax is the same
    codes, params = compress_log_probs(base)
    total = KldAccumulator.empty()
    total.add(measured, codes, params, np.array([1]))
    result = total.result(n_ctx=2, seconds=0.0)
    assert result.kld_mean == pytest.approx(math.log(2) / 4, abs=1e-4)
    assert result.top1_agree == 0.0  # argmax 0 against argmax 1
    assert result.ppl == pytest.approx(2.0, rel=1e-6)  # target 1 has q = 1/2
    assert result.ppl_base == pytest.approx(4.0, rel=1e-3)  # and p = 1/4
    assert result.delta_ppl == pytest.approx(-2.0, abs=1e-2)


def test_codes_keep_16_nats_to_within_half_a_step():
    logits = np.random.default_rng(1).normal(size=(4, 5000)) * 4
    codes, params = compress_log_probs(logits)
    exact = logits - logits.max(axis=1, keepdims=True)
    exact -= np.log(np.exp(exact).sum(axis=1, keepdims=True))
    kept = exact > -16
    # llama.cpp's step is 16/65535 nats; float32 scale/offset add a little
    assert np.abs(expand_log_probs(codes, params) - exact)[kept].max() < 16 / 65535


def row(name: str, bits: float, kld: float) -> KldRow:
    return KldRow(preset=name, weights=name, model="m", bits_per_weight=bits, kld_mean=kld, kld_p99=kld * 5,
                  kld_max=kld * 9, top1_agree=0.9, ppl=10, ppl_base=9, delta_ppl=1, n_tokens=100, n_ctx=128,
                  reference="ref")


def test_a_preset_out_of_line_with_its_bits_is_flagged():
    # KLD falling ~3x per bit, except Q6 which diverges more than Q4: gone wrong
    rows = flag_outliers((row("q3", 3.5, 0.3), row("q4", 4.5, 0.1), row("q5", 5.5, 0.033), row("q6", 6.6, 0.5),
                          row("q8", 8.5, 0.002)))
    flags = {r.preset: r.flag for r in rows}
    assert flags["q6"].startswith(GONE_WRONG) and "q4 with 4.50 bits per weight" in flags["q6"]
    assert [name for name, flag in flags.items() if flag] == ["q6"]


def test_a_clean_ladder_is_not_flagged():
    rows = flag_outliers((row("q4", 4.5, 0.1), row("q8", 8.5, 0.002)))
    assert all(not r.flag for r in rows)


@pytest.fixture(scope="module")
def quantized_cache(tmp_path_factory):
    """The module's cache of re-quantized copies: both tests load a Q8_0 of the F16 file, made once."""
    return tmp_path_factory.mktemp("kld-cache")


@pytest.fixture(scope="module")
def f16_model(tmp_path_factory):
    from workbench.core.engine.quantize import quantize

    return quantize(bundled_model_path(), "F16", out=tmp_path_factory.mktemp("kld") / "smollm2-f16.gguf")


def test_lower_precision_diverges_more_on_the_real_engine(f16_model, quantized_cache, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(quantized_cache))
    small = dict(ctx_size=256, batch_size=128, ubatch_size=128, threads=1)
    presets = (Preset("same-f16", weights="keep", **small), Preset("q8", weights="Q8_0", **small),
               Preset("q4", weights="Q4_0", **small))
    text = shipped_eval_text()[:600]  # ~130 tokens: fast, and under --kld-tokens so nothing is cut
    events = list(run_kld(KldConfig(Path(f16_model), presets, load_device("host"), text, n_ctx=128)))
    finished = events[-1]
    assert isinstance(finished, KldFinished) and not finished.failures
    assert "itself (F16)" in finished.reference_note
    rows = {r.preset: r for r in finished.rows}
    # the F16 file against itself: the same distributions (up to the 16-bit codes)
    assert rows["same-f16"].kld_mean < 1e-4 and rows["same-f16"].top1_agree == 1.0
    assert rows["q8"].kld_mean < rows["q4"].kld_mean
    assert rows["q8"].top1_agree >= rows["q4"].top1_agree
    assert rows["q4"].kld_p99 >= rows["q4"].kld_mean
    assert rows["q4"].bits_per_weight < rows["q8"].bits_per_weight < rows["same-f16"].bits_per_weight
    for r in rows.values():
        assert r.n_tokens > 100
        assert r.delta_ppl == pytest.approx(r.ppl - r.ppl_base)
        assert r.ppl_base == pytest.approx(rows["same-f16"].ppl_base)
    # the reference's ppl from its codes agrees with the F16 model's own ppl (same tokens, exact logits)
    assert rows["same-f16"].ppl == pytest.approx(rows["same-f16"].ppl_base, rel=1e-3)


def test_cli_kld_rows_in_csv_carry_the_quality_keys(f16_model, quantized_cache, tmp_path, cli, monkeypatch):
    import csv
    import io
    import math

    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(quantized_cache))
    text = tmp_path / "eval.txt"
    text.write_text(shipped_eval_text()[:400], encoding="utf-8")
    preset = tmp_path / "small-q8.toml"
    preset.write_text('name = "small-q8"\nweights = "Q8_0"\nctx_size = 256\nbatch_size = 128\nubatch_size = 128\n'
                      'threads = 1\n')
    done = cli("bench", "--kld", "--model", str(f16_model), "--presets", str(preset), "--eval-text", str(text),
               "--ppl-ctx", "128", "--output", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert len(rows) == 1 and rows[0]["preset"] == "small-q8"
    for key in ("kld_mean", "kld_p99", "top1_agree", "delta_ppl"):
        assert math.isfinite(float(rows[0][key]))  # a number, not n/a
    bad = cli("bench", "--kld", "--presets", "as-is", "--kld-tokens", "0")
    assert bad.returncode == 2 and "--kld-tokens" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
