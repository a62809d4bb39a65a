"""Replaying a hostile tegrastats log: one absurd line or an oversized file is one line, not minutes and gigabytes."""

from __future__ import annotations

from pathlib import Path

from workbench.cli.main import main
from workbench.core.telemetry.tegrastats import MAX_LOG_BYTES

CAPTURE = Path(__file__).parent / "sysfs" / "tegrastats" / "orin-nano-jetpack6.log"


def _first_line() -> str:
    return next(line for line in CAPTURE.read_text().splitlines() if line.strip() and not line.startswith("#"))


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("workbench: ") and "Traceback" not in captured.err
    return lines[0]


def test_a_line_listing_three_million_cores_is_refused_by_its_length(tmp_path, capsys):
    # A real Orin Nano line with "CPU [" followed by 3,000,000 "1%@1," entries: 15 MB in one
    # line. Every entry became two Python objects: 17 s and 420 MB before the first sample.
    line = _first_line()
    assert "CPU [" in line
    log = tmp_path / "wide.log"
    log.write_text(line.replace("CPU [", "CPU [" + "1%@1," * 3_000_000, 1) + "\n")
    assert main(["monitor", "--tegrastats", str(log), "--count", "1"]) == 2
    message = _one_error_line(capsys)
    assert f"{log}:1" in message and "a line of 15,000," in message


def test_a_log_larger_than_the_replay_reads_is_refused_before_reading(tmp_path, capsys):
    log = tmp_path / "huge.log"
    with open(log, "w") as stream:  # sparse: the size is what fstat says, no disk is used
        stream.write(_first_line() + "\n")
        stream.truncate(MAX_LOG_BYTES + 1)
    assert main(["monitor", "--tegrastats", str(log), "--count", "1"]) == 2
    assert "too large for a tegrastats log" in _one_error_line(capsys)


def test_every_real_capture_still_replays(capsys):
    for capture in sorted(CAPTURE.parent.glob("*.log")):
        assert main(["monitor", "--tegrastats", str(capture), "--count", "1"]) == 0, capture.name
