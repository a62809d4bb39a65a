"""`workbench download` short forms: owner/repo, owner/repo:QUANT (any case), hf.co/ prefix, --device best fit, hostile refs."""

from __future__ import annotations

import pytest
from gguf_factory import DEFAULT_LAYER_TYPES, TinyModel, write_tiny_gguf
from hubserver import hub  # noqa: F401 - hub is a fixture

from workbench.cli.main import main
from workbench.core.errors import HubError
from workbench.core.hub.short_ref import parse_short_ref

REPO = "test-org/Pair-GGUF"


@pytest.fixture
def pair(hub, tmp_path):
    """A small Q4_K_M file and a larger Q8_0 one (a bigger vocabulary: more weights, a larger logits buffer)."""
    small = write_tiny_gguf(tmp_path / "pair-Q4_K_M.gguf")
    large = write_tiny_gguf(tmp_path / "pair-Q8_0.gguf", TinyModel(n_vocab=12_000))
    hub.add_repo(REPO, {small.name: small, large.name: large})
    return small, large


def _snapshot_name(out: str) -> str:
    return out.strip().rsplit("/", 1)[-1]


def test_owner_repo_alone_picks_the_q4_k_m_file(pair, capsys):
    assert main(["download", REPO]) == 0
    assert _snapshot_name(capsys.readouterr().out) == "pair-Q4_K_M.gguf"


def test_a_tag_picks_by_quant_in_any_case_and_the_hf_co_prefix_is_taken(pair, capsys):
    assert main(["download", f"{REPO}:q8_0"]) == 0
    assert _snapshot_name(capsys.readouterr().out) == "pair-Q8_0.gguf"
    assert main(["download", f"hf.co/{REPO}:Q8_0", "--json"]) == 0
    assert '"already_cached": true' in capsys.readouterr().out
    assert main(["download", f"{REPO}:Q5_K_M"]) == 2
    assert capsys.readouterr().err.strip() == f"workbench: no Q5_K_M file in {REPO}. Tags it has: Q4_K_M, Q8_0"
    assert main(["download", f"{REPO}:Q8_0", "--quant", "Q4_K_M"]) == 2
    assert "give one of FILE, --quant or REPO:QUANT" in capsys.readouterr().err


def test_without_a_q4_k_m_file_and_no_tag_the_user_is_asked_for_one(hub, tmp_path, capsys):
    files = {name: write_tiny_gguf(tmp_path / name) for name in ("m-Q8_0.gguf", "m-Q4_0.gguf")}
    hub.add_repo("test-org/NoDefault-GGUF", files)
    assert main(["download", "test-org/NoDefault-GGUF"]) == 2
    err = capsys.readouterr().err
    assert "has no single Q4_K_M file to pick by default" in err and "tags it has: Q4_0, Q8_0" in err


def test_with_a_device_the_fit_search_picks_the_file(hub, tmp_path, capsys):
    """Q8_0 loses less quality than Q4_K_M (llama.cpp's table): the fit search picks it where both fit; a tag
    narrows the search to its files; where nothing fits, one line."""
    small = write_tiny_gguf(tmp_path / "pair-Q4_K_M.gguf", TinyModel(n_ctx_train=4096))
    q8_layers = {role: ("F32" if role.endswith("norm") else "Q8_0") for role in DEFAULT_LAYER_TYPES}
    large = write_tiny_gguf(tmp_path / "pair-Q8_0.gguf", TinyModel(n_ctx_train=4096, file_type=7,  # MOSTLY_Q8_0
                                                                     layer_types=q8_layers))
    hub.add_repo(REPO, {small.name: small, large.name: large})
    devices = tmp_path / "wb-config" / "devices"
    devices.mkdir(parents=True)
    (devices / "roomy.toml").write_text('name = "roomy"\nram_total_mb = 65536\nmem_bandwidth_gbs = 4.0\ncores = 1\n')

    assert main(["download", REPO, "--device", "roomy"]) == 0
    captured = capsys.readouterr()
    assert _snapshot_name(captured.out) == "pair-Q8_0.gguf" and "pair-Q8_0.gguf picked by the fit search" in captured.err
    assert main(["download", f"{REPO}:q4_k_m", "--device", "roomy"]) == 0
    assert _snapshot_name(capsys.readouterr().out) == "pair-Q4_K_M.gguf"
    (devices / "tiny.toml").write_text(
        'name = "tiny"\nram_total_mb = 1024\nmem_bandwidth_gbs = 4.0\ncores = 1\n[reserves_mb]\nos = 1023\n')
    assert main(["download", REPO, "--device", "tiny"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"workbench: no file of {REPO} fits tiny: ") and err.count("\n") == 1
    assert not list((tmp_path / "hf" / "hub").glob("models--*/blobs/*.incomplete"))


@pytest.mark.parametrize("ref", [
    "test-org/Pair-GGUF:../../etc", "test-org/Pair-GGUF:", "test-org/Pair-GGUF:Q4\nK", "test-org/Pair-GGUF:" + "Q" * 40,
    "../Pair-GGUF", "test-org/Pair--GGUF", "test-org/Pair GGUF", "x" * 300, "test-org/Pair-GGUF:a:b", "/abs/path/x",
])
def test_hostile_references_are_refused_before_the_hub_is_asked(hub, ref, capsys):
    with pytest.raises(HubError):
        parse_short_ref(ref)
    assert main(["download", ref]) == 2
    err = capsys.readouterr().err
    assert err.startswith("workbench: ") and err.count("\n") == 1 and len(err) < 600
    assert hub.requests == []
