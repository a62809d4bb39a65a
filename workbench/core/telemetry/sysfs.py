"""Reading small sysfs/procfs files under a filesystem root, with a reader seam for tests."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path

from workbench.core.config.cpu_topology import format_cpu_list, parse_cpu_list

# A reader takes a path and returns the file's text stripped of whitespace and NULs, or
# raises OSError. Samplers take one so tests can inject PermissionError: the tests run as
# root, and root reads a chmod-000 file anyway.
Reader = Callable[[Path], str]


def read_text(path: Path) -> str:
    """One raw read of a small file: sysfs attributes are a page at most; no buffering."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 8192)
    finally:
        os.close(fd)
    # Device-tree strings end in NUL, sysfs values in a newline.
    return data.decode("utf-8", "replace").strip().strip("\x00").strip()


def read_int(reader: Reader, path: Path) -> int | None:
    """An integer attribute, or None when the file is missing, unreadable or not a number."""
    try:
        return int(reader(path))
    except (OSError, ValueError):
        return None


def read_int_why(reader: Reader, path: Path) -> tuple[int | None, str]:
    """(value, "") or (None, why): a live reading that fails is named with its reason, never 0.

    Drivers answer a read they cannot serve with EINVAL (a sensor not ready), ENODATA (no
    reading yet), EIO, EAGAIN; an unprivileged user gets EACCES; some files hold "-", "N/A"
    or nothing at all.
    """
    try:
        text = reader(path)
    except OSError as error:
        return None, f"{os_error_text(error)} reading {path}"
    try:
        return int(text), ""
    except ValueError:
        shown = "empty file" if not text else f"no number in it ({text[:20]!r})"
        return None, f"{shown}: {path}"


_NO_VALUE = ("", "-", "N/A", "n/a")


def read_word_why(reader: Reader, path: Path) -> tuple[str | None, str]:
    """A text attribute (a governor, a status): (text, "") or (None, why) for an error, "", "-" or "N/A"."""
    try:
        text = reader(path)
    except OSError as error:
        return None, f"{os_error_text(error)} reading {path}"
    if text in _NO_VALUE:
        return None, f"{'empty file' if not text else f'no value in it ({text!r})'}: {path}"
    return text, ""


def os_error_text(error: OSError) -> str:
    """"EINVAL (Invalid argument)", "permission denied (EACCES)", "missing"."""
    if isinstance(error, FileNotFoundError):
        return "missing"
    if isinstance(error, PermissionError):
        return "permission denied (EACCES, needs root)"
    code = errno.errorcode.get(error.errno or 0, "")
    reason = error.strerror or os.strerror(error.errno or 0)
    return f"{code} ({reason})" if code else reason


def read_optional(reader: Reader, path: Path) -> str | None:
    try:
        return reader(path)
    except OSError:
        return None


def natural_key(path: Path) -> list[object]:
    """Sort thermal_zone10 after thermal_zone9."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def sorted_glob(base: Path, pattern: str) -> list[Path]:
    try:
        return sorted(base.glob(pattern), key=natural_key)
    except OSError:
        return []


def under(root: Path, absolute: str) -> Path:
    """`/sys/class/hwmon` under the root being read."""
    return root / absolute.lstrip("/")


def cpu_list(text: str) -> str:
    """"0 1 2 3 6" (sysfs related_cpus) or "0-3,6" -> "0-3,6"; "" for a list that is malformed or absurd."""
    try:
        return format_cpu_list(parse_cpu_list(text))
    except ValueError:
        return ""
