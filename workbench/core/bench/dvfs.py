"""CPU frequency limits for a DVFS sweep: write cpufreq caps and governors, and always put the originals back.

The originals are written to a state file *before* the first change, so that a sweep
killed with SIGKILL (or a power cut) is undone by the next `workbench bench` start
(`restore_pending`). The sysfs root is a parameter so tests run on copies of recorded trees.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.paths import cache_dir
from workbench.core.telemetry.sysfs import Reader, read_text, sorted_glob, under

CPUFREQ = "/sys/devices/system/cpu/cpufreq"
STATE_FORMAT = "workbench-cpufreq-originals/1"
STATE_FILE_NAME = "cpufreq-originals.json"
_POLICY_NAME = re.compile(r"policy\d{1,4}")
_GOVERNOR = re.compile(r"[a-z0-9_]{1,32}")
_MAX_KHZ = 100_000_000  # 100 GHz: anything above is not a CPU clock
_MAX_STATE_BYTES = 64 * 1024
_MAX_POLICIES = 256

Writer = Callable[[Path, str], None]


def write_text(path: Path, value: str) -> None:
    """One write of a sysfs attribute (no truncation dance: sysfs files take the whole value at once)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode("ascii"))
    finally:
        os.close(fd)


def default_state_path() -> Path:
    return cache_dir() / STATE_FILE_NAME


@dataclass(frozen=True)
class PolicyLimits:
    """What one cpufreq policy is set to (the values written back on restore)."""

    policy: str
    max_khz: int  # scaling_max_freq
    min_khz: int  # scaling_min_freq
    governor: str  # scaling_governor
    hw_min_khz: int  # cpuinfo_min_freq
    hw_max_khz: int  # cpuinfo_max_freq


@dataclass(frozen=True)
class DvfsSetting:
    """One point of the sweep: a CPU clock cap (None: leave it) and a governor (None: leave it)."""

    max_khz: int | None = None
    governor: str | None = None

    @property
    def label(self) -> str:
        parts = [f"{self.max_khz / 1000:.0f} MHz" if self.max_khz else "", self.governor or ""]
        return " ".join(p for p in parts if p) or "as set"


def parse_frequencies(text: str) -> tuple[int | None, ...]:
    """'1200,1800MHz,2.4GHz,max' -> kHz values (None for 'max': the hardware maximum). Bare numbers are MHz."""
    values: list[int | None] = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item == "max":
            values.append(None)
            continue
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ghz|mhz|khz)?", item)
        if not match:
            raise WorkbenchError(f"{raw.strip()!r} is not a frequency", where="--cpu-max-freq",
                                 fix="give MHz values or units, e.g. --cpu-max-freq 1200,1800MHz,2.4GHz,max")
        factor = {"ghz": 1_000_000, "mhz": 1000, "khz": 1, None: 1000}[match.group(2)]
        khz = round(float(match.group(1)) * factor)
        if not 1 <= khz <= _MAX_KHZ:
            raise WorkbenchError(f"{raw.strip()} is outside any CPU clock range", where="--cpu-max-freq",
                                 fix="give MHz values such as 1200")
        values.append(khz)
    if not values:
        raise WorkbenchError("no frequency given", where="--cpu-max-freq", fix="e.g. --cpu-max-freq 1200,1800,max")
    return tuple(values)


def check_governor(name: str) -> str:
    if not _GOVERNOR.fullmatch(name):
        raise WorkbenchError(f"{name!r} is not a cpufreq governor name", where="--governor",
                             fix="e.g. --governor performance, powersave, schedutil, ondemand")
    return name


class CpufreqLimits:
    """The cpufreq policies under `root`: read them, change them for a sweep, restore them."""

    def __init__(self, root: str | Path = "/", state_path: Path | None = None,
                 reader: Reader = read_text, writer: Writer = write_text) -> None:
        self.root = Path(root)
        self.state_path = state_path if state_path is not None else default_state_path()
        self._read, self._write = reader, writer
        self._saved = False

    def policies(self) -> tuple[PolicyLimits, ...]:
        found = []
        for path in sorted_glob(under(self.root, CPUFREQ), "policy*"):
            if not _POLICY_NAME.fullmatch(path.name):
                continue
            try:
                found.append(PolicyLimits(
                    policy=path.name,
                    max_khz=int(self._read(path / "scaling_max_freq")),
                    min_khz=int(self._read(path / "scaling_min_freq")),
                    governor=self._read(path / "scaling_governor"),
                    hw_min_khz=int(self._read(path / "cpuinfo_min_freq")),
                    hw_max_khz=int(self._read(path / "cpuinfo_max_freq")),
                ))
            except (OSError, ValueError):
                continue  # an offline or partial policy: nothing we could set or restore
        return tuple(found)

    def not_writable_reason(self) -> str:
        """'' when every policy's limits can be written; else one line saying why not."""
        policies = self.policies()
        if not policies:
            return f"no cpufreq policies under {under(self.root, CPUFREQ)}: the CPU clocks cannot be set here"
        for policy in policies:
            folder = under(self.root, CPUFREQ) / policy.policy
            try:
                # writing the value already in force changes nothing, and proves the write works
                self._write(folder / "scaling_max_freq", str(policy.max_khz))
                self._write(folder / "scaling_governor", policy.governor)
            except OSError as error:
                why = error.strerror or type(error).__name__
                return f"cpufreq limits are not writable here ({folder}: {why}); measuring at the current setting"
        return ""

    def available_governors(self, policy: str) -> tuple[str, ...]:
        try:
            text = self._read(under(self.root, CPUFREQ) / policy / "scaling_available_governors")
        except OSError:
            return ()
        return tuple(name for name in text.split() if _GOVERNOR.fullmatch(name))

    def apply(self, setting: DvfsSetting) -> None:
        """Write the setting to every policy; the originals go to the state file first (once)."""
        try:
            self._apply(setting)
        except OSError as error:
            raise WorkbenchError(f"could not set the CPU clock limits for {setting.label} ({error.strerror or error})",
                                 where=str(getattr(error, "filename", "") or under(self.root, CPUFREQ)),
                                 fix="the originals are restored; check the value against cpuinfo_min/max_freq") from error

    def _apply(self, setting: DvfsSetting) -> None:
        policies = self.policies()
        if not self._saved:
            save_state(self.state_path, self.root, policies)
            self._saved = True
        originals = {p.policy: p for p in load_state(self.state_path, self.root)}
        for policy in policies:
            folder = under(self.root, CPUFREQ) / policy.policy
            original = originals.get(policy.policy, policy)
            if setting.governor is not None:
                known = self.available_governors(policy.policy)
                if known and setting.governor not in known:
                    raise WorkbenchError(f"governor {setting.governor!r} is not available on {policy.policy}",
                                         where=str(folder), fix=f"use one of: {', '.join(known)}")
                self._write(folder / "scaling_governor", setting.governor)
            # 'max' (None) is the policy's own cap from before the sweep, not necessarily the hardware max
            cap = original.max_khz if setting.max_khz is None else setting.max_khz
            cap = max(policy.hw_min_khz, min(cap, policy.hw_max_khz))
            if cap < policy.min_khz:
                self._write(folder / "scaling_min_freq", str(policy.hw_min_khz))  # max below min is refused
            self._write(folder / "scaling_max_freq", str(cap))

    def restore(self) -> tuple[PolicyLimits, ...]:
        """Write the saved originals back and delete the state file; what was restored."""
        if not self.state_path.exists():
            return ()
        originals = load_state(self.state_path, self.root)
        for original in originals:
            folder = under(self.root, CPUFREQ) / original.policy
            if not folder.is_dir():
                continue  # the policy went away (CPU hot-unplugged): nothing to put back
            # widen first, so that neither write is refused for crossing the other bound
            self._write(folder / "scaling_min_freq", str(original.hw_min_khz))
            self._write(folder / "scaling_max_freq", str(original.max_khz))
            self._write(folder / "scaling_min_freq", str(original.min_khz))
            self._write(folder / "scaling_governor", original.governor)
        self.state_path.unlink(missing_ok=True)
        self._saved = False
        return originals


def save_state(state_path: Path, root: Path, policies: Sequence[PolicyLimits]) -> None:
    """Write the originals durably (temp file, fsync, rename) before anything is changed."""
    document = {
        "format": STATE_FORMAT,
        "root": str(Path(root).resolve()),
        "pid": os.getpid(),
        "policies": [
            {"policy": p.policy, "max_khz": p.max_khz, "min_khz": p.min_khz, "governor": p.governor,
             "hw_min_khz": p.hw_min_khz, "hw_max_khz": p.hw_max_khz}
            for p in policies
        ],
    }
    state_path.parent.mkdir(parents=True, exist_ok=True)
    partial = state_path.with_name(state_path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, state_path)


def load_state(state_path: Path, root: Path) -> tuple[PolicyLimits, ...]:
    """The originals from a state file, every value checked: it is outside data when it is read back."""
    where = str(state_path)
    fix = "check it against `workbench monitor --once`, restore the limits by hand, then delete the file"
    try:
        if state_path.stat().st_size > _MAX_STATE_BYTES:
            raise WorkbenchError("the saved cpufreq limits file is too large to be ours", where=where, fix=fix)
        document = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise WorkbenchError(f"cannot read the saved cpufreq limits ({error})", where=where, fix=fix) from error
    if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
        raise WorkbenchError("not a saved cpufreq limits file", where=where, fix=fix)
    if document.get("root") != str(Path(root).resolve()):
        raise WorkbenchError(f"the saved limits belong to the tree {document.get('root')!r}, not {root}",
                             where=where, fix=fix)
    items = document.get("policies")
    if not isinstance(items, list) or len(items) > _MAX_POLICIES:
        raise WorkbenchError("the saved policies are not a list of a sane length", where=where, fix=fix)
    policies = []
    for item in items:
        if not isinstance(item, dict):
            raise WorkbenchError("a saved policy is not a table", where=where, fix=fix)
        name, governor = item.get("policy"), item.get("governor")
        numbers = [item.get(key) for key in ("max_khz", "min_khz", "hw_min_khz", "hw_max_khz")]
        if not (isinstance(name, str) and _POLICY_NAME.fullmatch(name)):
            raise WorkbenchError(f"saved policy name {name!r} is not policyN", where=where, fix=fix)
        if not (isinstance(governor, str) and _GOVERNOR.fullmatch(governor)):
            raise WorkbenchError(f"saved governor {governor!r} of {name} is not a governor name", where=where, fix=fix)
        if not all(type(n) is int and 1 <= n <= _MAX_KHZ for n in numbers):
            raise WorkbenchError(f"saved clocks of {name} are not kHz values", where=where, fix=fix)
        policies.append(PolicyLimits(name, numbers[0], numbers[1], governor, numbers[2], numbers[3]))
    return tuple(policies)


def state_owner_alive(state_path: Path) -> int | None:
    """The pid of a still-running process that wrote the state file (its sweep is live), else None."""
    try:
        pid = json.loads(state_path.read_text(encoding="utf-8")).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    if type(pid) is not int or pid <= 0:
        return None
    if pid == os.getpid():
        return pid  # this process's own sweep
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, someone else's
    return pid


def _saved_root(state_path: Path) -> str | None:
    try:
        root = json.loads(state_path.read_text(encoding="utf-8")).get("root")
    except (OSError, ValueError, AttributeError):
        return None  # unreadable: load_state says why
    return root if isinstance(root, str) else None


def restore_pending(root: str | Path = "/", state_path: Path | None = None,
                    reader: Reader = read_text, writer: Writer = write_text) -> str:
    """At start: undo the limits a killed sweep left behind. One line saying what was done, or ''."""
    limits = CpufreqLimits(root, state_path, reader, writer)
    if not limits.state_path.exists():
        return ""
    saved_root = _saved_root(limits.state_path)
    if saved_root is not None and saved_root != str(Path(root).resolve()):
        return f"the saved CPU clock limits in {limits.state_path} are for {saved_root}, not {root}: left alone"
    owner = state_owner_alive(limits.state_path)
    if owner == os.getpid():
        return ""  # our own sweep holds them and restores them itself
    if owner is not None:
        return f"a DVFS sweep (pid {owner}) is running and holds the CPU clock limits; not touching them"
    try:
        restored = limits.restore()
    except OSError as error:
        raise WorkbenchError(f"could not restore the CPU clock limits a killed sweep left ({error})",
                             where=str(limits.state_path),
                             fix="run `workbench bench` again as the user that set them, or restore them by hand") from error
    described = ", ".join(f"{p.policy} {p.max_khz / 1000:.0f} MHz {p.governor}" for p in restored)
    return f"restored the CPU clock limits a killed sweep left behind: {described}"


@contextmanager
def limits_held(limits: CpufreqLimits) -> Iterator[CpufreqLimits]:
    """Restore the originals however the sweep ends: normally, on Ctrl-C, or on SIGTERM."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        def terminated(signum: int, _frame: object) -> None:
            raise SystemExit(128 + signum)  # unwinds through the finally below

        previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield limits
    finally:
        try:
            limits.restore()
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
