"""Monitoring logs: one CSV or JSON-lines row per sample, every figure with its source, rotated by size."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from workbench.core.errors import WorkbenchError
from workbench.core.telemetry.metrics import PREFIX, MetricPoint, sample_metrics
from workbench.core.telemetry.sample import TelemetrySample
from workbench.core.units import MIB

LOG_FORMATS = (".csv", ".jsonl")
# Labels that say which figure a point is: they go into the CSV column name. The others
# (source, the sensor's own label, governor, cause, ...) describe where it came from.
_IDENTITY_LABELS = ("sensor", "core", "policy", "rail", "unit")
_FIXED_COLUMNS = ("time_utc", "monotonic_s")
_UNAVAILABLE_COLUMN = "unavailable"


def csv_cells(sample: TelemetrySample) -> dict[str, str]:
    """{column: cell} for one sample: "temperature_celsius[cpu]" -> "48.562", and beside it
    "temperature_celsius[cpu] source" -> "source=/sys/class/thermal/thermal_zone0/temp; label=cpu-thermal".
    A figure with no source is an empty cell; the `unavailable` column says why."""
    cells: dict[str, str] = {}
    unavailable: list[str] = []
    for point in sample_metrics(sample):
        labels = dict(point.labels)
        if point.name == PREFIX + "unavailable":
            unavailable.append(f"{labels['what']}: {labels['why']}")
            continue
        column = _column(point)
        value = point.value
        cells[column] = str(int(value)) if value == int(value) else repr(round(value, 6))
        described = "; ".join(f"{key}={value}" for key, value in point.labels if key not in _IDENTITY_LABELS and value)
        cells[f"{column} source"] = _text_cell(described)
    cells[_UNAVAILABLE_COLUMN] = _text_cell("; ".join(unavailable))
    return cells


def _text_cell(text: str) -> str:
    """Sensor and rail names come from drivers and devices: a cell a spreadsheet would run as a formula
    (=, +, -, @ first) is opened as text instead."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _column(point: MetricPoint) -> str:
    keys = [value for key, value in point.labels if key in _IDENTITY_LABELS]
    name = point.name.removeprefix(PREFIX)
    return f"{name}[{','.join(keys)}]" if keys else name


class SampleLog:
    """Appends samples to FILE.csv or FILE.jsonl; past `max_bytes` the file becomes FILE.1.csv (FILE.1
    becomes FILE.2, ...) and at most `keep` rotated files are kept.

    CSV: the header is written once per file and the columns stay those of the header. A figure
    that was not there when the file began (a sensor that appeared) starts a new file, so a
    spreadsheet never sees a row wider than its header.
    """

    def __init__(self, path: str | Path, *, max_bytes: int = 10 * MIB, keep: int = 5,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.path = Path(path)
        self.format = self.path.suffix.lower()
        if self.format not in LOG_FORMATS:
            raise WorkbenchError(f"a log file ends in .csv or .jsonl, not {self.path.suffix or 'nothing'!r}",
                                 where=str(self.path), fix="give --log FILE.csv (a spreadsheet) or FILE.jsonl")
        if max_bytes < 4096:
            raise WorkbenchError(f"a log of at most {max_bytes} bytes holds no more than a few rows",
                                 fix="give --log-max-mb 0.01 or more")
        if keep < 0:
            raise WorkbenchError(f"cannot keep {keep} rotated files", fix="give --log-keep 0 or more")
        self.max_bytes = max_bytes
        self.keep = keep
        self._clock = clock
        self._columns: list[str] | None = None
        _check_writable(self.path)
        if self.format == ".csv":
            self._columns = _existing_header(self.path)

    def write(self, sample: TelemetrySample) -> None:
        now = self._clock().isoformat(timespec="milliseconds")
        if self.format == ".jsonl":
            self._append(json.dumps({"time_utc": now, **sample_record(sample)}, separators=(",", ":")) + "\n")
            return
        cells = {"time_utc": now, "monotonic_s": f"{sample.timestamp:.3f}", **csv_cells(sample)}
        if self._columns is not None and not set(cells) <= set(self._columns):
            self._rotate()  # a figure the header lacks: a new file, whose header has its column
            self._columns = None
        if self._columns is None:
            # In the order the sample gives them: memory, CPU, temperatures, clocks, power, loads.
            figures = [column for column in cells if column not in (*_FIXED_COLUMNS, _UNAVAILABLE_COLUMN)]
            self._columns = [*_FIXED_COLUMNS, *figures, _UNAVAILABLE_COLUMN]
        self._append(_csv_line([cells.get(column, "") for column in self._columns]))

    def _append(self, row: str) -> None:
        size = self.path.stat().st_size if self.path.exists() else 0
        if size and size + len(row.encode()) > self.max_bytes:
            self._rotate()
            size = 0
        text = row
        if size == 0 and self.format == ".csv":
            text = _csv_line(self._columns or []) + row  # the header, once at the top of each file
        try:
            with open(self.path, "a", encoding="utf-8", newline="") as out:
                out.write(text)
        except OSError as error:
            raise WorkbenchError(f"cannot write the log: {error.strerror}", where=str(self.path),
                                 fix="free some space or give --log another file") from error

    def _rotate(self) -> None:
        """FILE -> FILE.1, FILE.1 -> FILE.2, ...; the oldest beyond `keep` is removed."""
        try:
            if self.keep == 0:
                self.path.unlink(missing_ok=True)
                return
            oldest = self.rotated(self.keep)
            oldest.unlink(missing_ok=True)
            for number in range(self.keep - 1, 0, -1):
                if self.rotated(number).exists():
                    os.replace(self.rotated(number), self.rotated(number + 1))
            if self.path.exists():
                os.replace(self.path, self.rotated(1))
        except OSError as error:
            raise WorkbenchError(f"cannot rotate the log: {error.strerror}", where=str(self.path),
                                 fix="check the folder's permissions or give --log another file") from error

    def rotated(self, number: int) -> Path:
        """monitor.csv -> monitor.1.csv: the copy keeps its extension, so a spreadsheet still opens it."""
        return self.path.with_name(f"{self.path.stem}.{number}{self.path.suffix}")


def _csv_line(cells: list[str]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)  # RFC 4180 line ends, as spreadsheets expect
    return out.getvalue()


def _existing_header(path: Path) -> list[str] | None:
    try:
        with open(path, encoding="utf-8", newline="") as existing:
            first = existing.readline(65536)  # a header line; a file without one is not read whole
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise WorkbenchError(f"cannot read the existing log ({error})", where=str(path),
                             fix="give --log a new file name") from error
    if not first.strip():
        return None
    header = next(csv.reader([first]))
    if header[: len(_FIXED_COLUMNS)] != list(_FIXED_COLUMNS):
        raise WorkbenchError("this file is not a workbench monitor log; it would be appended to", where=str(path),
                             fix="give --log a new file name")
    return header


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise WorkbenchError("is a folder, not a file", where=str(path), fix="give --log a file name, e.g. monitor.csv")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise WorkbenchError("no such folder for the log", where=str(folder), fix="create it first or give another --log")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise WorkbenchError("cannot write the log there", where=str(path), fix="give --log a writable path")


def sample_record(sample: TelemetrySample) -> dict[str, Any]:
    """The whole sample as plain data (JSON lines): every figure with its source, clocks with `capped`."""
    data = asdict(sample)
    for clock, record in zip(sample.clocks, data["clocks"]):
        record["capped"] = clock.capped
    return data
