"""A repository's GGUF files: quant from the name, split parts grouped, sizes and LFS hashes from the hub."""

from __future__ import annotations

import json

import pytest

from hubserver import hub, sha256_of  # noqa: F401 - hub is a fixture
from gguf_factory import TinyModel, write_tiny_gguf
from workbench.cli.main import main
from workbench.core.errors import HubError
from workbench.core.hub.files import RemoteFile, group_gguf_files, list_gguf_files, missing_parts, quant_from_name


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("qwen2.5-0.5b-instruct-q4_k_m.gguf", "Q4_K_M"),
        ("Phi-3.5-mini-instruct-IQ4_XS.gguf", "IQ4_XS"),
        ("gemma-2-2b-it-IQ2_XXS.gguf", "IQ2_XXS"),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"),
        ("SmolLM2-1.7B-Instruct-Q8_0.gguf", "Q8_0"),
        ("Llama-3.2-3B-Instruct-Q6_K_L.gguf", "Q6_K_L"),
        ("Qwen3-4B-UD-Q4_K_XL.gguf", "Q4_K_XL"),
        ("model-f16.gguf", "F16"),
        ("model-fp16.gguf", "F16"),
        ("SmolLM3-3B-bf16.gguf", "BF16"),
        ("Meta-Llama-3.1-70B-Instruct-Q4_K_M-00001-of-00002.gguf", "Q4_K_M"),
        ("Q4_K_M/Model-Q4_K_M.gguf", "Q4_K_M"),
        ("Model-Q3_K_S.gguf", "Q3_K_S"),
        ("Model-IQ3_M-imat.gguf", "IQ3_M"),
        ("mmproj-model.gguf", None),
        ("Q2_Kristal-7B.gguf", None),
    ],
)
def test_quant_type_from_the_file_name(name, quant):
    assert quant_from_name(name) == quant


def test_split_parts_are_grouped_under_the_first_part_and_gaps_are_found():
    files = (
        RemoteFile("big-Q4_K_M-00002-of-00003.gguf", 200, "b"),
        RemoteFile("big-Q4_K_M-00001-of-00003.gguf", 300, "a"),
        RemoteFile("big-Q4_K_M-00003-of-00003.gguf", 100, "c"),
        RemoteFile("small-Q8_0.gguf", 50, "d"),
        RemoteFile("half-Q2_K-00001-of-00002.gguf", 10, "e"),
        RemoteFile("README.md", 5, None),
    )
    half, small, big = group_gguf_files(files)  # smallest first
    assert (small.name, small.quant, small.size_bytes, small.is_split) == ("small-Q8_0.gguf", "Q8_0", 50, False)
    assert big.name == "big-Q4_K_M-00001-of-00003.gguf" and big.quant == "Q4_K_M" and big.size_bytes == 600
    assert [p.sha256 for p in big.parts] == ["a", "b", "c"] and missing_parts(big) == ()
    assert missing_parts(half) == (2,)


def test_listing_comes_from_one_model_info_request_with_sizes_and_lfs_hashes(hub, tmp_path):
    small = write_tiny_gguf(tmp_path / "tiny-Q8_0.gguf", TinyModel(file_type=7))
    bigger = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf", TinyModel(n_layer=4))
    repo = hub.add_repo("test-org/Tiny-GGUF", {small.name: small, bigger.name: bigger}, gated=True,
                        extra_files={"README.md": b"# tiny\n"})
    listing = list_gguf_files("test-org/Tiny-GGUF")
    assert listing.commit == repo.commit and listing.gated
    assert [(f.name, f.quant, f.size_bytes) for f in listing.files] == [
        ("tiny-Q8_0.gguf", "Q8_0", small.stat().st_size), ("tiny-Q4_K_M.gguf", "Q4_K_M", bigger.stat().st_size)]
    assert listing.files[1].parts[0].sha256 == sha256_of(bigger)
    assert listing.other_files == ("README.md",)
    assert listing.by_quant("q4_k_m").name == "tiny-Q4_K_M.gguf"
    with pytest.raises(HubError) as caught:
        listing.by_quant("IQ4_XS")
    assert str(caught.value) == "no IQ4_XS file in test-org/Tiny-GGUF. Quant types it has: Q4_K_M, Q8_0"
    asked = [r.path for r in hub.requests if r.path != "/api/agent-harnesses"]  # huggingface_hub's own user-agent probe
    assert asked == ["/api/models/test-org/Tiny-GGUF/revision/main"]


def test_a_bad_repository_id_is_refused_before_any_request(hub):
    with pytest.raises(HubError, match="is not a repository id"):
        list_gguf_files("just-a-name")
    assert hub.requests == []


def test_cli_files_table_and_json(hub, tmp_path, capsys):
    tiny = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    hub.add_repo("test-org/Tiny-GGUF", {tiny.name: tiny})
    assert main(["files", "test-org/Tiny-GGUF"]) == 0
    out = capsys.readouterr().out
    assert "tiny-Q4_K_M.gguf  Q4_K_M  831.5 kB      1" in out
    assert "workbench files test-org/Tiny-GGUF --preview" in out

    assert main(["files", "test-org/Tiny-GGUF", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["files"]
    assert entry["quant"] == "Q4_K_M" and entry["parts"][0]["sha256"] == sha256_of(tiny)
    assert "preview" not in entry

    assert main(["files", "test-org/Missing-GGUF"]) == 2
    assert "no repository test-org/Missing-GGUF" in capsys.readouterr().err


def test_cli_files_title_of_a_gated_repository_wraps_on_an_80_column_terminal(hub, tmp_path, capsys, monkeypatch):
    tiny = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    hub.add_repo("test-org/Tiny-GGUF", {tiny.name: tiny}, gated=True)
    monkeypatch.setattr("workbench.cli.text_table.terminal_width", lambda: 80)
    assert main(["files", "test-org/Tiny-GGUF"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("test-org/Tiny-GGUF @ ") and lines[1] == "  HF_TOKEN)"
    assert all(len(line) <= 80 for line in lines[:2])
