"""`workbench ledger`'s verdict when it does not fit: the whole overrun and the lines that make the total,
the same words on the app's verdict line, and exit code 3 for a script to gate on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MIB = 2**20


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def board(tmp_path: Path) -> Path:
    """The field report's board: 512 MiB of RAM, 250 MiB reserved, so 262 MiB left for the LLM."""
    path = tmp_path / "b512.toml"
    path.write_text('name = "b512"\nram_total_mb = 512\nmem_bandwidth_gbs = 10\ncores = 4\n[reserves_mb]\nos = 250\n')
    return path


def _figures(cli, *argv: str) -> dict:
    code, out, _ = cli("ledger", "bundled", *argv, "--json")
    assert code == 3, "--json exits 3 on 'does not fit' too"
    return json.loads(out)


def _verdict_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("verdict:"))


def _mib(n_bytes: int) -> str:  # written here, not the product's formatter: one decimal under 100 MiB
    value = n_bytes / MIB
    return f"{value:,.0f} MiB" if value >= 100 else f"{value:,.1f} MiB"


def test_the_verdict_gives_the_whole_overrun_and_the_lines_that_make_it(cli, board):
    figures = _figures(cli, "--preset", "quality-q8", "--device", str(board))
    code, out, _ = cli("ledger", "bundled", "--preset", "quality-q8", "--device", str(board))
    assert code == 3
    verdict = _verdict_line(out)
    budget = (512 - 250) * MIB
    over = figures["total_bytes"] - budget
    assert over > figures["compute_bytes"] / 2  # the report's case: far more than the first line past the budget
    # the whole overrun against the budget worked out by hand, not a running total at the first crossing line
    assert f"= {_mib(figures['total_bytes'])} predicted, {_mib(over)} over the 262 MiB left for the LLM on b512" in verdict
    assert "takes the total to" not in verdict and "does not fit: does not fit" not in verdict
    # every line that adds up to the total, with its own figure, largest first
    named = {"the weights": figures["weights_bytes"], "the KV cache": figures["kv_bytes"],
             "the compute buffer": figures["compute_bytes"], "the runtime overhead": figures["overhead_bytes"]}
    for name, n_bytes in named.items():
        assert f"{name} {_mib(n_bytes)}" in verdict
    order = sorted(named, key=lambda name: -named[name])
    positions = [verdict.index(name) for name in order]
    assert positions == sorted(positions)
    assert " MB" not in out  # the table and the lines under it hold MiB and say so
    assert "LINE               MiB  SOURCE" in out


def test_an_absurd_context_names_the_lines_over_the_budget_alone(cli, board):
    figures = _figures(cli, "--preset", "quality-q8", "--device", str(board), "--ctx", "16777216")
    code, out, _ = cli("ledger", "bundled", "--preset", "quality-q8", "--device", str(board), "--ctx", "16777216")
    assert code == 3
    verdict = _verdict_line(out)
    over = figures["total_bytes"] - 262 * MIB
    assert f"{_mib(over)} over the 262 MiB left" in verdict
    alone = verdict.rpartition(" — ")[2]  # each line that is larger than the budget by itself
    assert figures["kv_bytes"] > 262 * MIB and figures["compute_bytes"] > 262 * MIB
    assert alone == "the KV cache and the compute buffer are each over the budget alone"
    assert verdict.index("the KV cache") < verdict.index("the weights")  # the largest line first


def test_a_ledger_that_fits_exits_zero(cli):
    code, out, _ = cli("ledger", "bundled", "--preset", "as-is", "--device", "jetson-orin-nano-8gb")
    assert code == 0 and "verdict: FITS — " in out and "left for the LLM on jetson-orin-nano-8gb" in out


def test_the_app_verdict_line_says_the_same_sentence(cli, board):
    from workbench.core.config.devices import load_device
    from workbench.core.config.presets import load_preset
    from workbench.core.gguf.reader import read_gguf
    from workbench.core.ledger.predict import predict_ledger
    from workbench.core.paths import bundled_model_path
    from workbench.ui.widgets.verdict_line import Prediction, describe_for_main

    ledger = predict_ledger(read_gguf(bundled_model_path()), load_preset("quality-q8"), load_device(str(board)))
    text, css_class = describe_for_main(Prediction(None, ledger), None)
    _, out, _ = cli("ledger", "bundled", "--preset", "quality-q8", "--device", str(board))
    assert css_class == "-nofit"
    assert text == "✘ " + _verdict_line(out).removeprefix("verdict: ")


def test_chat_refusal_names_the_flag_and_says_does_not_fit_once(cli, board):
    code, out, err = cli("chat", "bundled", "--preset", "quality-q8", "--device", str(board))
    assert code == 2, err
    assert err.count("does not fit") == 1 and "does not fit: does not fit" not in err
    assert "over the 262 MiB left for the LLM on b512" in err
    assert "--allow-overbudget" in err


def test_a_context_past_the_one_limit_is_refused_as_the_preset_editor_refuses_it(cli, tmp_path):
    # 16,777,216 tokens is the ceiling of a preset file and of the app's editor; --ctx takes the same
    code, _, err = cli("ledger", "bundled", "--preset", "as-is", "--ctx", "100000000")
    assert code == 2 and "--ctx 100,000,000 must be 0 (the model's trained context) or 16 to 16,777,216 tokens" in err
    preset = tmp_path / "huge.toml"
    preset.write_text('name = "huge"\nctx_size = 100000000\n')
    code, _, err = cli("ledger", "bundled", "--preset", str(preset))
    assert code == 2 and "16777216" in err.replace(",", "")


def test_the_named_lines_add_up_to_the_total_with_a_recurrent_state(board):
    import dataclasses

    from workbench.core.config.devices import load_device
    from workbench.core.config.presets import load_preset
    from workbench.core.gguf.reader import read_gguf
    from workbench.core.ledger.predict import predict_ledger
    from workbench.core.ledger.verdict_text import verdict_reason
    from workbench.core.paths import bundled_model_path

    ledger = predict_ledger(read_gguf(bundled_model_path()), load_preset("quality-q8"), load_device(str(board)))
    state = 30 * MIB  # a recurrent model's state buffer is one more line of the total
    recurrent = dataclasses.replace(ledger, rs_bytes=state, total_bytes=ledger.total_bytes + state,
                                    headroom_bytes=ledger.headroom_bytes - state)
    reason = verdict_reason(recurrent)
    assert "the recurrent state 30.0 MiB" in reason
    assert f"{_mib(recurrent.total_bytes - 262 * MIB)} over" in reason
    assert "recurrent state" not in verdict_reason(ledger)  # a line of 0 bytes is left out


def test_every_verdict_and_the_device_figures_say_mib_the_unit_they_hold(cli):
    # The preset editor showed "20,505 MiB" in its table and "20,505 MB" in the verdict row for one figure:
    # the row's text is the ledger's reason, which now says MiB as the ledger counts (2**20 bytes).
    from workbench.core.config.preset import DeviceProfile, Preset
    from workbench.core.gguf.reader import read_gguf
    from workbench.core.ledger.predict import predict_ledger
    from workbench.core.paths import bundled_model_path

    model = read_gguf(bundled_model_path())
    for budget_mb in (100, 330, 8000):  # does not fit, tight, fits
        device = DeviceProfile("b", ram_total_mb=budget_mb + 100, reserves_mb=(("os", 100),), mem_bandwidth_gbs=10)
        reason = predict_ledger(model, Preset("p", weights="keep", ctx_size=2048), device).reason
        assert " MB" not in reason and f"{budget_mb:,} MiB" in reason.replace(".0 MiB", " MiB"), reason
    code, out, _ = cli("devices", "show", "raspberry-pi-5-8gb")
    figures = [line for line in out.splitlines()
               if line.split()[:1] in (["ram_total_mb"], ["budget"]) or line.strip().startswith("reserves_mb.")]
    assert code == 0 and len(figures) >= 3 and all(" MiB" in line and " MB" not in line for line in figures), out
    assert "MiB (RAM minus reserves)" in out
