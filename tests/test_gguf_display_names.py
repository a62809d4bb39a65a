"""A model's own name (general.name) is outside data: printed, it must not drive the user's terminal."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from gguf_factory import TinyModel, gguf_string, packed_gguf, write_tiny_gguf
from workbench.cli.main import main
from workbench.core.gguf.reader import read_gguf

# OSC 0 sets the window title, ESC [2J clears the screen, U+009B is CSI to an 8-bit terminal,
# U+202E reverses what follows.
HOSTILE = "evil\x1b]0;PWNED\x07\x1b[2J\u009b2J\u202eledom"


def _controls(text: str) -> list[str]:
    return [char for char in text if ord(char) < 0x20 and char not in "\n\t" or 0x7F <= ord(char) <= 0x9F or char == "\u202e"]


@pytest.fixture
def hostile_model(tmp_path):
    return write_tiny_gguf(tmp_path / "named.gguf", dataclasses.replace(TinyModel(), name=HOSTILE))


def test_the_model_name_is_read_with_its_control_characters_shown_as_question_marks(hostile_model):
    assert read_gguf(hostile_model).name == "evil?]0;PWNED??[2J?2J?ledom"


@pytest.mark.parametrize("argv", [["inspect"], ["ledger", "--preset", "as-is"]])
def test_inspect_and_ledger_print_no_terminal_control(hostile_model, capsys, argv):
    # Before: both printed the name raw, so a downloaded model could retitle and clear the terminal.
    assert main([argv[0], str(hostile_model), *argv[1:]]) == 0
    captured = capsys.readouterr()
    assert "evil?]0;PWNED" in captured.out
    assert _controls(captured.out + captured.err) == []


def _refusal(path, capsys) -> str:
    assert main(["inspect", str(path)]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err and _controls(captured.out + captured.err) == []
    return lines[0]


def _string_kv(key: bytes, value: bytes) -> bytes:
    return gguf_string(key) + struct.pack("<I", 8) + gguf_string(value)


@pytest.mark.parametrize("where", ["architecture", "metadata key", "tensor name"])
def test_names_the_reader_matches_and_prints_are_refused_with_a_control_character(tmp_path, capsys, where):
    # Before: `inspect` printed "ll\x1b[2Jama" and "tok\x1b[31membd.weight" raw (and --tensors listed them).
    arch = b"ll\x1b[2Jama" if where == "architecture" else b"llama"
    key = b"general.quantized_\x1b]0;T\x07by" if where == "metadata key" else b"general.quantized_by"
    tensor = b"tok\x1b[31membd.weight" if where == "tensor name" else b"token_embd.weight"
    header = _string_kv(b"general.architecture", arch) + _string_kv(key, b"me")
    header += gguf_string(tensor) + struct.pack("<IQIQ", 1, 32, 0, 0)  # one F32 dimension of 32 at offset 0
    path = packed_gguf(tmp_path / "escaped.gguf", 1, 2, header, size=4096)
    line = _refusal(path, capsys)
    assert "contains a control character" in line and str(path) in line
