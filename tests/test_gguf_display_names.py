"""A model's own name (general.name) is outside data: printed, it must not drive the user's terminal."""

from __future__ import annotations

import dataclasses

import pytest

from gguf_factory import TinyModel, write_tiny_gguf
from workbench.cli.main import main
from workbench.core.gguf_reader import read_gguf

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
