"""Jetson `tegrastats` lines (JetPack 4 to 7) parsed; sources replay a log or run the tool."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.files.regular import MIB, read_regular_file

_TIMESTAMP = re.compile(r"^(\d\d-\d\d-\d{4} \d\d:\d\d:\d\d)\s")
_RAM = re.compile(r"\bRAM (\d+)/(\d+)MB")
_SWAP = re.compile(r"\bSWAP (\d+)/(\d+)MB(?: \(cached (\d+)MB\))?")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_CPU_CORE = re.compile(r"(\d+)%(?:@(\d+))?")
# EMC_FREQ 15%@204, EMC_FREQ 0% (JetPack 4), EMC_FREQ @2133 (DriveOS: no load).
_EMC = re.compile(r"\bEMC_FREQ (?:(\d+)%)?(?:@(\d+))?")
# GR3D_FREQ 0%@76 (JetPack 4), 0%@[305] (Orin JetPack 5/6), 0%@[0,0] (two GPCs), 0%,
# @[314,314,314] (Thor, JetPack 7.0: clocks of three GPCs and no load at all).
_GPU = re.compile(r"\bGR3D_FREQ (?:(\d+)%)?(?:@\[?([\d,]+)\]?)?")
# Codec and helper engines: NVENC 79%@166, NVENC0_FREQ @314, NVDEC off, VIC_FREQ 115, VIC 36%@115,
# APE 174 (MHz), OFA_FREQ @315, NVDLA0 off, PVA0_FREQ off, NVENC 716 (JetPack 4: MHz).
_ENGINE = re.compile(
    r"\b(NVENC\d*|NVDEC\d*|NVJPG\d*|VIC|OFA|APE|NVDLA\d*|PVA\d*)(?:_FREQ)? (off\b|(?:(\d+)%)?@?(\d+)\b)"
)
_TEMPERATURE = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C\b")
# JetPack 5/6: "VDD_IN 5251mW/8535mW"; JetPack 7.2 adds a third figure ("5139mW/5139mW/5139mW").
_RAIL_MW = re.compile(r"\b([A-Z][A-Z0-9_]*) (\d+)mW/(\d+)mW")
# JetPack 4: mW implied, names with a prefix (POM_5V_IN, VDD_IN) or without one on Xavier
# (GPU 463/463 CPU 618/618 SOC 2936/2936 CV 0/0 VDDRQ 309/309 SYS5V 3306/3306). The lookahead
# keeps RAM 1343/7620MB and IRAM 0/252kB out.
_RAIL_BARE = re.compile(r"\b([A-Z][A-Z0-9_]*) (\d+)/(\d+)(?![\w/])")
# The board or module input, in order of preference: it is the total where it exists.
MAX_LOG_BYTES = 16 * MIB  # ~35,000 lines, 10 hours at 1 Hz, parsed up front (~200 MB); a larger file is refused
MAX_LINE_CHARS = 4096  # real lines (Thor, 16 cores, every rail) are under 1,000 characters
INPUT_RAILS = ("VDD_IN", "VIN", "POM_5V_IN")
# Channels that are no rail at all: unconnected INA3221 inputs and its summing channel.
NOT_RAILS = ("NC", "SUM OF SHUNT VOLTAGES")
# Fixed placeholders, not measurements: PMIC@100C (Nano, TX1/TX2), PMIC@50C (Xavier).
_PLACEHOLDER_SENSORS = ("PMIC",)
_DEAD_BELOW_C = -100.0  # tegrastats prints -256C for a sensor that is off


def is_rail(name: str) -> bool:
    return name.strip().upper() not in NOT_RAILS


def total_of_rails(rails: dict[str, float]) -> tuple[str, float] | None:
    """(how it was found, mW or W) for the rails of one reading.

    The input rail (VDD_IN, VIN, POM_5V_IN) is the total where it exists. Otherwise
    (AGX Orin, AGX Xavier) the module has no input monitor, and the total is the sum of
    its rails: VIN_SYS_5V0 is the 5 V system rail, one of them, not the total
    (jetson_stats issue #344).
    """
    connected = {name: value for name, value in rails.items() if is_rail(name)}
    for name in INPUT_RAILS:
        if name in connected:
            return name, connected[name]
    if not connected:
        return None
    return "sum of " + "+".join(connected), sum(connected.values())


@dataclass(frozen=True)
class TegrastatsReading:
    """One tegrastats line. Anything the line does not carry is None or empty."""

    line: str
    format: str  # "jetpack4" (bare rail numbers) or "jetpack5+" (mW units)
    timestamp: str | None = None  # JetPack 5.1+/6/7 prefix "05-09-2026 18:42:06"
    ram_used_mb: int | None = None
    ram_total_mb: int | None = None
    swap_used_mb: int | None = None
    swap_total_mb: int | None = None
    swap_cached_mb: int | None = None
    cpu_load_percent: tuple[float | None, ...] = ()  # None: core off
    cpu_mhz: tuple[int | None, ...] = ()
    emc_percent: float | None = None
    emc_mhz: int | None = None
    gpu_percent: float | None = None  # None on Thor (JetPack 7.0 prints no GPU load)
    gpu_mhz: int | None = None
    gpc_mhz: tuple[int, ...] = ()  # each GPC's clock where the line lists them
    temperatures: tuple[tuple[str, float], ...] = ()  # as tegrastats names them
    rails_mw: tuple[tuple[str, float, float], ...] = ()  # (name, now, running average); NC dropped
    engines: tuple[tuple[str, float | None, int | None], ...] = ()  # ("nvenc", 79.0, 166); off ones left out
    engines_off: tuple[str, ...] = ()  # engines the line shows as "off"

    @property
    def total_rail(self) -> tuple[str, float] | None:
        """The total in mW and where it came from: the input rail, else the sum of the rails."""
        return total_of_rails({name: now for name, now, _ in self.rails_mw})


def parse_tegrastats_line(line: str) -> TegrastatsReading:
    """Parse one line; raises ValueError when it is not a tegrastats line (no RAM field)."""
    line = line.strip()
    if len(line) > MAX_LINE_CHARS:  # "CPU [" + 3M cores in one 15 MB line took 17 s and 420 MB
        raise ValueError(f"a line of {len(line):,} characters; tegrastats writes lines under {MAX_LINE_CHARS:,}")
    ram = _RAM.search(line)
    if ram is None:
        raise ValueError(f"not a tegrastats line: {line[:60]!r}")
    values: dict[str, object] = {"ram_used_mb": int(ram[1]), "ram_total_mb": int(ram[2])}
    if stamp := _TIMESTAMP.match(line):
        values["timestamp"] = stamp[1]
    if swap := _SWAP.search(line):
        values["swap_used_mb"], values["swap_total_mb"] = int(swap[1]), int(swap[2])
        values["swap_cached_mb"] = int(swap[3]) if swap[3] is not None else None
    if cpu := _CPU.search(line):
        loads: list[float | None] = []
        clocks: list[int | None] = []
        for entry in cpu[1].split(","):
            core = _CPU_CORE.fullmatch(entry.strip())
            loads.append(float(core[1]) if core else None)
            clocks.append(int(core[2]) if core and core[2] else None)
        values["cpu_load_percent"], values["cpu_mhz"] = tuple(loads), tuple(clocks)
    if emc := _EMC.search(line):
        values["emc_percent"] = float(emc[1]) if emc[1] is not None else None
        values["emc_mhz"] = int(emc[2]) if emc[2] else None
    if gpu := _GPU.search(line):
        values["gpu_percent"] = float(gpu[1]) if gpu[1] is not None else None
        if gpu[2]:
            gpcs = tuple(int(part) for part in gpu[2].split(",") if part)
            values["gpc_mhz"] = gpcs if len(gpcs) > 1 else ()
            values["gpu_mhz"] = max(gpcs)
    engines, engines_off = [], []
    for name, state, percent, mhz in _ENGINE.findall(line):
        if state == "off":
            engines_off.append(name.lower())
        else:
            engines.append((name.lower(), float(percent) if percent else None, int(mhz)))
    values["engines"], values["engines_off"] = tuple(engines), tuple(engines_off)
    values["temperatures"] = tuple(
        (name, float(celsius))
        for name, celsius in _TEMPERATURE.findall(line)
        if float(celsius) > _DEAD_BELOW_C and name.upper() not in _PLACEHOLDER_SENSORS
    )
    rails = _RAIL_MW.findall(line)
    line_format = "jetpack5+"
    if not rails:
        rails = _RAIL_BARE.findall(line)
        line_format = "jetpack4" if rails else ("jetpack5+" if _TIMESTAMP.match(line) or "@[" in line else "jetpack4")
    values["rails_mw"] = tuple((name, float(now), float(average)) for name, now, average in rails if is_rail(name))
    return TegrastatsReading(line=line, format=line_format, **values)  # type: ignore[arg-type]


class TegrastatsLog:
    """Replays a recorded tegrastats log: each `next_reading()` is the next line, None at the end."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            text = read_regular_file(self.path, max_bytes=MAX_LOG_BYTES, what="a tegrastats log",
                                     fix="give a file written by `tegrastats --logfile FILE`, or 'live' to run tegrastats",
                                     ).decode("utf-8", errors="replace")
        except OSError as error:
            raise WorkbenchError(
                f"cannot read tegrastats log ({error.strerror})",
                where=str(self.path),
                fix="give a file written by `tegrastats --logfile FILE`, or 'live' to run tegrastats",
            ) from None
        self._readings = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                self._readings.append(parse_tegrastats_line(line))
            except ValueError as error:
                reason = f" ({error})" if str(error).startswith("a line of") else ""
                raise WorkbenchError(
                    f"not a tegrastats line{reason}", where=f"{self.path}:{number}", fix="give a log written by tegrastats"
                ) from None
        self._next = 0
        self.source = f"tegrastats log {self.path.name}"

    @property
    def finished(self) -> bool:
        return self._next >= len(self._readings)

    def next_reading(self) -> TegrastatsReading | None:
        if self.finished:
            return None
        reading = self._readings[self._next]
        self._next += 1
        return reading

    def close(self) -> None:
        pass


class TegrastatsLive:
    """Runs `tegrastats --interval MS`; a thread keeps the newest line, so a sample never waits."""

    def __init__(self, interval_ms: int = 500, executable: str = "tegrastats") -> None:
        path = shutil.which(executable)
        if path is None:
            raise WorkbenchError(
                "tegrastats is not installed here", where=executable, fix="run on a Jetson, or give a recorded log"
            )
        self._process = subprocess.Popen(
            [path, "--interval", str(interval_ms)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._latest: TegrastatsReading | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._follow, name="tegrastats", daemon=True)
        self._thread.start()
        self.source = "tegrastats"

    def _follow(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            try:
                reading = parse_tegrastats_line(line)
            except ValueError:
                continue  # a warning line ("tegrastats needs sudo ...") between samples
            with self._lock:
                self._latest = reading

    @property
    def finished(self) -> bool:
        """The tool exited (killed, or refused to run): its last line is no longer the present."""
        return self._process.poll() is not None

    def next_reading(self) -> TegrastatsReading | None:
        if self.finished:
            return None
        with self._lock:
            return self._latest

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._thread.join(timeout=2)
