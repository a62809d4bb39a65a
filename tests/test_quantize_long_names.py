"""Quantizing a source whose file name is as long as a name may be: the cache and -o names still fit."""

from __future__ import annotations

import pytest

from gguf_factory import write_tiny_gguf
from workbench.cli.main import main
from workbench.core.gguf.reader import read_gguf
from workbench.core.engine.quantize import quantize, quantized_cache_dir

# 249 bytes + ".gguf" = 254: a legal name (ext4/xfs/tmpfs take 255). "é" is two bytes, so a cut
# in the middle of one would leave invalid UTF-8.
LONG_STEM = "m" * 120 + "é" * 64 + "x"


@pytest.fixture
def long_named_source(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert len((LONG_STEM + ".gguf").encode()) == 254
    return write_tiny_gguf(tmp_path / f"{LONG_STEM}.gguf")


def test_the_cached_copy_of_a_long_named_source_fits_one_file_name(long_named_source):
    # Before: the cache name (stem + 16-hex key + type + .gguf, 280 bytes) and its .part-PID
    # raised ENAMETOOLONG: `workbench quantize SRC --to Q8_0` ended in a traceback, exit 1.
    made = quantize(long_named_source, "Q8_0")
    assert made.parent == quantized_cache_dir() and made.is_file()
    assert len(made.name.encode()) <= 255 and made.name.endswith(".Q8_0.gguf") and made.name.startswith("m" * 120)
    assert read_gguf(made).file_type == "Q8_0"
    assert quantize(long_named_source, "Q8_0") == made  # found again: the cut name is the key
    assert not list(made.parent.glob("*.part-*"))


def test_cli_output_into_a_folder_with_a_long_named_source(long_named_source, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert main(["quantize", str(long_named_source), "--to", "Q8_0", "-o", str(out)]) == 0
    [made] = out.iterdir()
    assert len(made.name.encode()) <= 255 and made.name.endswith(".Q8_0.gguf")
    assert "Traceback" not in capsys.readouterr().err
