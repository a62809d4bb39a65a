"""`workbench quantize -o OUT` refuses a file already at OUT unless --force (a tiny random-weight GGUF, the real quantizer)."""

from __future__ import annotations

import pytest

from gguf_factory import write_tiny_gguf
from workbench.core.gguf.reader import read_gguf

KEEP = b"a file the user wants to keep\n"


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def test_an_existing_output_file_is_refused_in_one_line_and_kept(source, tmp_path, cli):
    existing = tmp_path / "mine.gguf"
    existing.write_bytes(KEEP)
    done = cli("quantize", str(source), "--to", "Q8_0", "-o", str(existing))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "the output file exists" in done.stderr and "--force" in done.stderr
    assert str(existing) in done.stderr and "quantizing" not in done.stderr
    assert existing.read_bytes() == KEEP


def test_the_default_name_inside_a_folder_is_refused_too(source, tmp_path, cli):
    out = tmp_path / "out"
    out.mkdir()
    (out / "tiny.Q8_0.gguf").write_bytes(KEEP)
    done = cli("quantize", str(source), "--to", "Q8_0", "-o", str(out))
    assert done.returncode == 2 and "the output file exists" in done.stderr
    assert (out / "tiny.Q8_0.gguf").read_bytes() == KEEP


def test_force_replaces_the_file(source, tmp_path, cli):
    existing = tmp_path / "mine.gguf"
    existing.write_bytes(KEEP)
    done = cli("quantize", str(source), "--to", "Q8_0", "-o", str(existing), "--force")
    assert done.returncode == 0, done.stderr
    assert read_gguf(existing).file_type == "Q8_0"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("mine")) == ["mine.gguf"]
