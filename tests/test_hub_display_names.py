"""File names from a hostile mirror that would drive or fool the terminal they are printed to are refused."""

from __future__ import annotations

import pytest

from gguf_factory import write_tiny_gguf
from hubserver import hub  # noqa: F401 - a fixture
from workbench.cli.main import main

REPO = "evil/Display-GGUF"


@pytest.mark.parametrize("name", [
    "m\u009b2J-Q4_K_M.gguf",  # U+009B is CSI ("ESC [") to a terminal reading 8-bit controls: clears the screen
    "m\u0085-Q4_K_M.gguf",  # NEL, another C1 control: a line break inside one listed name
    "model-Q4_K_M-\u202efuggu.gguf",  # right-to-left override: listed as "model-Q4_K_M-.gguf" + "uggf" reversed
    "model\u2066-Q8_0\u2069.gguf",  # isolate controls, the same trick
])
def test_a_listed_name_with_a_c1_or_bidi_control_is_refused_and_never_printed(hub, tmp_path, capsys, name):
    hub.add_repo(REPO, {name: write_tiny_gguf(tmp_path / "tiny.gguf")})
    for argv in (["files", REPO], ["files", REPO, "--preview"], ["download", REPO, name]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        lines = [line for line in captured.err.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in captured.err
        assert hub.url in lines[0] and "control character" in lines[0]
        assert not any(0x7F <= ord(char) <= 0x9F or 0x2066 <= ord(char) <= 0x2069 or char == "\u202e"
                       for char in captured.out + captured.err)


def test_names_in_other_scripts_are_still_listed(hub, tmp_path, capsys):
    name = "日本語-モデル-Q4_K_M.gguf"
    hub.add_repo(REPO, {name: write_tiny_gguf(tmp_path / "tiny.gguf")})
    assert main(["files", REPO]) == 0
    assert name in capsys.readouterr().out
