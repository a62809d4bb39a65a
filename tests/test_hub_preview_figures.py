"""`files --preview`'s closing figure (bytes fetched) stays true when some files of the repository are unreadable."""

from __future__ import annotations

from pathlib import Path

from gguf_factory import with_u32_field, write_tiny_gguf
from hubserver import hub  # noqa: F401 - a fixture
from workbench.cli.main import main

REPO = "mallory/Mixed-GGUF"


def test_the_fetched_bytes_line_says_unreadable_files_are_not_counted(hub, tmp_path: Path, capsys):
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    forged = with_u32_field(tiny, "llama.block_count", 2**32 - 1, "forged-Q4_K_M.gguf")
    hub.add_repo(REPO, {"forged-Q4_K_M.gguf": forged})
    assert main(["files", REPO, "--preview"]) == 0
    out = capsys.readouterr().out
    assert "unreadable" in out
    # The server sent the forged header's bytes (by its own count), yet the line read "0 B fetched
    # with range requests", as if nothing had crossed the network.
    assert hub.body_bytes_sent() > 0
    assert "headers: 0 B fetched with range requests (not counting the 1 unreadable), 0 of 1 from the header cache" in out
