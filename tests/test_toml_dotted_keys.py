"""Dotted TOML keys deeper than presets and device profiles use are refused before tomllib parses them."""

from __future__ import annotations

import tomllib
import tracemalloc
from pathlib import Path

import pytest

from workbench.core.config.devices import load_device
from workbench.core.config.presets import load_preset
from workbench.core.config.toml_checks import read_toml
from workbench.core.config.toml_scan import MAX_KEY_PARTS, shape_problem
from workbench.core.errors import PresetError
from workbench.core.paths import data_dir

MB = 1024 * 1024


def _dotted(parts: int, quoted: bool = False) -> str:
    part = '"a"' if quoted else "a"
    return ".".join([part] * (parts - 1) + ["b"]) + " = 1\n"


@pytest.mark.parametrize("quoted", [False, True])
def test_eighty_thousand_dotted_parts_are_refused_with_the_line_in_little_memory(tmp_path: Path, quoted: bool):
    # 20,000 parts took tomllib 5 s and 1.6 GB; 80,000 ran out of memory in `workbench ledger --preset`.
    path = tmp_path / "bomb.toml"
    path.write_text('name = "bomb"\n\n' + _dotted(80_000, quoted), encoding="utf-8")
    tracemalloc.start()
    try:
        with pytest.raises(PresetError) as caught:
            read_toml(path, "preset")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert f"{path}:3" in message and "dotted parts" in message and "\n" not in message
    assert peak < 100 * MB, f"{peak / MB:.0f} MB"
    # the file's own size is the floor: the check copies nothing per part
    assert peak < 4 * path.stat().st_size + 2 * MB


def test_the_same_file_loaded_as_a_preset_is_one_line_naming_file_and_line(tmp_path: Path):
    path = tmp_path / "bomb.toml"
    path.write_text(_dotted(20_000), encoding="utf-8")
    with pytest.raises(PresetError) as caught:
        load_preset(str(path))
    assert str(caught.value).startswith(f"{path}:1: ")


@pytest.mark.parametrize("text, line", [
    ("[a.b.c.d.e]\nx = 1\n", 1),  # a table header alone
    ("[speed.t2]\nread_gbs.Q8_0.x = 1\n", 2),  # header parts count toward the keys under it
    ('x = 1\ny = { a.b.c.d.e = 1 }\n', 2),  # inside an inline table
    ('y = { q = 1, a . "b" . \'c\' . d . e = 1 }\n', 1),  # after a comma, spaces around dots, quoted parts
    ("[[a.b.c.d.e]]\n", 1),  # an array of tables
    ('s = """\nline\n"""\n[a.b.c.d.e]\n', 4),  # lines inside a multi-line string are counted
])
def test_deep_keys_anywhere_are_found_on_their_line(text: str, line: int):
    tomllib.loads(text)  # valid TOML: only the depth is refused
    problem = shape_problem(text)
    assert problem is not None and problem.kind == "key" and problem.line == line


@pytest.mark.parametrize("text", [
    "[speed.t2]\nread_gbs = { Q8_0 = 12.5 }\n",
    "speed.t2.read_gbs.Q8_0 = 12.5\n",
    "[speed.t2.read_gbs]\nQ8_0 = 12.5\n",
    '"reserves_mb.os" = "a quoted key is one part: a.b.c.d.e"\n',
    'note = "a.b.c.d.e.f = 1"  # a.b.c.d.e.f = 2\n',
    "points = [[1.3, 4.0], [10.5, 7.3]]\nversion = 1.2\n",
    "s = '''\na.b.c.d.e.f = 1\n'''\n",
    "arr = [\n  { a.b = 1 },\n  2,\n]\n",
])
def test_keys_as_deep_as_the_formats_use_pass(text: str):
    tomllib.loads(text)
    assert shape_problem(text) is None


def test_every_shipped_preset_and_profile_passes_the_check():
    files = sorted(data_dir("presets").glob("*.toml")) + sorted((data_dir("presets") / "devices").glob("*.toml"))
    assert len(files) >= 8
    for path in files:
        assert shape_problem(path.read_text(encoding="utf-8")) is None, path
    assert MAX_KEY_PARTS == 4  # speed.t2.read_gbs.Q8_0, the deepest path of a device profile
    load_device("jetson-orin-nano-8gb")
