"""`workbench bench compare` given hostile files: a FIFO, /dev/zero, JSON nested 100,000 deep, a rate of 400 digits."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli.main import main

LLAMA_BENCH = Path(__file__).parent / "llama_bench" / "qwen2.5-7b-rtx4080.json"


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("workbench: ")
    return lines[0]


def _memory_capped() -> None:
    # 2 GiB of address space: before the fix /dev/zero was read until memory ran out
    # (3.9 GB after 6 s on this box); the cap turns that into a MemoryError, not a dead machine.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_named_for_what_it_is_and_never_read(tmp_path, special):
    if special == "fifo":
        special = str(tmp_path / "results.json")
        os.mkfifo(special)  # nobody ever writes to it: a plain open() waits for ever
    # A subprocess, so a read that never ends fails this test (at the timeout) instead of hanging the run.
    done = subprocess.run([sys.executable, "-m", "workbench", "bench", "compare", special, str(LLAMA_BENCH)],
                          capture_output=True, text=True, timeout=120, preexec_fn=_memory_capped)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and special in lines[0]
    assert ("named pipe (FIFO)" in lines[0]) if special.endswith(".json") else ("character device" in lines[0])


def test_json_nested_deeper_than_the_decoder_recurses_is_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)  # 100 kB: far below the 64 MiB size limit
    assert main(["bench", "compare", str(deep), str(LLAMA_BENCH)]) == 2
    line = one_error_line(capsys)
    assert str(deep) in line and "not a bench result file" in line


@pytest.mark.parametrize("key", ["avg_ts", "stddev_ts"])
def test_a_rate_of_400_digits_is_one_line_naming_the_field(tmp_path, capsys, key):
    rows = json.loads(LLAMA_BENCH.read_text())
    rows[0][key] = 10**400  # valid JSON; float() of it raises OverflowError
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(rows))
    assert main(["bench", "compare", str(hostile), str(LLAMA_BENCH)]) == 2
    line = one_error_line(capsys)
    assert f"{hostile}: test row 1" in line and key in line and "is not a rate" in line


def _one_line_from(argv: list[str], special: str) -> str:
    done = subprocess.run([sys.executable, "-m", "workbench", *argv], capture_output=True, text=True, timeout=300,
                          preexec_fn=_memory_capped)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"workbench: {special}: is ")
    return lines[0]


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_as_a_tegrastats_log_or_an_evaluation_text_is_refused_unread(tmp_path, special):
    # Before: monitor --tegrastats and bench --eval-text read the path whole with read_text():
    # a FIFO blocked for ever, /dev/zero ended in MemoryError (or filled memory without a cap).
    if special == "fifo":
        special = str(tmp_path / "replay.log")
        os.mkfifo(special)
    kind = "named pipe (FIFO)" if special.endswith(".log") else "character device"
    assert kind in _one_line_from(["monitor", "--tegrastats", special, "--count", "1"], special)
    line = _one_line_from(["bench", "--model", "bundled", "--presets", "as-is", "--eval-text", special], special)
    assert kind in line and "evaluation text" in line
