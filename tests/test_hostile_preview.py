"""`files --preview` of a hostile GGUF on a hub mirror: refused from its header, in bounded memory (issue 10, item 2)."""

from __future__ import annotations

import functools
import tracemalloc
from pathlib import Path

import gguf
import pytest

from gguf_factory import with_u32_field, write_tiny_gguf
from hubserver import hub  # noqa: F401 - hub is a fixture
from workbench.cli.main import main
from workbench.core.errors import GGUFError
from workbench.core.hub.preview import read_remote_header

REPO = "mallory/forged-GGUF"
FILE = "forged-Q4_K_M.gguf"


@pytest.fixture
def forged_repo(hub, tmp_path: Path) -> Path:
    forged = with_u32_field(write_tiny_gguf(tmp_path / "tiny.gguf"), "llama.block_count", 2**32 - 1, FILE)
    hub.add_repo(REPO, {FILE: forged})
    return forged


def test_a_forged_block_count_over_http_ranges_is_refused_in_bounded_memory(forged_repo: Path):
    tracemalloc.start()
    try:
        with pytest.raises(GGUFError) as caught:
            read_remote_header(REPO, FILE)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"{REPO}/{FILE}" in str(caught.value) and "at most 512 layers" in str(caught.value)
    assert peak < 16 * 1024 * 1024  # the HTTP client included; the old per-layer list grew by ~110 MB/s


def test_files_preview_names_the_forged_file_and_lists_the_rest(forged_repo: Path, capsys):
    assert main(["files", REPO, "--preview", "--preset", "balanced-q4km", "--device", "raspberry-pi-5-8gb"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith(FILE))
    assert "unreadable" in row and "at most 512 layers" in out


def test_a_split_model_whose_first_part_claims_more_layers_than_all_parts_hold(hub, tmp_path: Path, monkeypatch):
    # Under llama.cpp's 512-layer cap, so no single part can be refused: only the parts put
    # together show that 300 layers were claimed and 2 delivered.
    folder = tmp_path / "split"
    folder.mkdir()
    with monkeypatch.context() as patch:
        patch.setattr(gguf, "GGUFWriter", functools.partial(gguf.GGUFWriter, split_max_tensors=12))
        write_tiny_gguf(folder / "tiny-Q4_K_M.gguf")
    parts = sorted(folder.iterdir())
    first = parts[0]
    forged = with_u32_field(first, "llama.block_count", 300, "forged-part")
    forged.replace(first)
    hub.add_repo("mallory/Split-GGUF", {p.name: p for p in parts})
    with pytest.raises(GGUFError) as caught:
        read_remote_header("mallory/Split-GGUF", first.name)
    assert "llama.block_count is 300 but the file holds the tensors of 2 layers" in str(caught.value)
