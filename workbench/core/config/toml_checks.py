"""Finding and reading preset and device TOML files into checked values, with file:line in every error."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from workbench.core.config.toml_scan import MAX_KEY_PARTS, MAX_NESTING, shape_problem
from workbench.core.errors import PresetError
from workbench.core.files.model_ref import path_error_text, special_file_kind
from workbench.core.units import MIB

Entry = TypeVar("Entry")  # a Preset or a DeviceProfile
MAX_TOML_BYTES = MIB  # presets and device profiles take a few hundred bytes
_UTF8_BOM = b"\xef\xbb\xbf"
_SYNTAX_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_TABLE_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


@dataclass(frozen=True)
class TomlSource:
    """Where checked values came from: a label for errors and the file's text to find lines in."""

    label: str  # the path as the user gave it, or a name like "preset" for in-memory data
    text: str = ""  # the file's text; "" when the values were not read from a file

    def where(self, key: str | None = None, table: str | None = None) -> str:
        """`label:line` of `key` (in `[table]` when given), or just the label if not found."""
        if key is None or not self.text:
            return self.label
        line = key_line(self.text, key, table)
        return f"{self.label}:{line}" if line else self.label


def key_line(text: str, key: str, table: str | None = None) -> int | None:
    """1-based line where `key = ...` is assigned, at top level or inside `[table]`."""
    pattern = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    current_table: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE_HEADER.match(line)
        if header:
            current_table = header.group(1).strip("\"'")
            if table is None and current_table == key:
                return number  # `[key]` opens the table the key names
            continue
        if current_table == table and pattern.match(line):
            return number
    if table is not None:  # the table itself, e.g. `reserves_mb = {...}` inline
        return key_line(text, table)
    return None


def read_toml(path: Path, kind: str) -> tuple[dict[str, Any], TomlSource]:
    """Parse a TOML file; a missing file or a syntax error becomes one PresetError line."""
    label = str(path)
    try:
        raw = _read_small_file(path, kind, label)
    except FileNotFoundError:
        raise PresetError(f"no {kind} file here", where=label, fix=f"Check the path, or give a {kind} name") from None
    except IsADirectoryError:
        raise PresetError(f"is a folder, not a {kind} file", where=label,
                          fix=f"Give the path of a .toml file inside it, or a {kind} name") from None
    except PermissionError as error:
        raise PresetError(f"cannot read the {kind} file ({error.strerror})", where=label,
                          fix="Check the file's permissions") from None
    except OSError as error:
        raise PresetError(path_error_text(error), where=label, fix=f"Give the path of a {kind} .toml file") from None
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is read past, not a syntax error
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        start = error.start + (len(_UTF8_BOM) if raw.startswith(_UTF8_BOM) else 0)
        line = raw[:start].count(b"\n") + 1
        raise PresetError(f"not UTF-8 text (byte {start})", where=f"{label}:{line}",
                          fix=f"A {kind} is a TOML text file; save it as UTF-8") from None
    problem = shape_problem(text)  # before tomllib: its cost on either grows faster than the text
    if problem is not None and problem.kind == "nesting":
        raise PresetError(f"values nested more than {MAX_NESTING} levels deep (arrays or tables inside each other)",
                          where=f"{label}:{problem.line}", fix=f"A {kind} holds plain values and flat lists: remove the "
                                                                "extra brackets")
    if problem is not None:
        raise PresetError(f"a key deeper than {MAX_KEY_PARTS} dotted parts (with its [table] header); the deepest "
                          "key of presets and device profiles is speed.t2.read_gbs.Q8_0", where=f"{label}:{problem.line}",
                          fix="Write the keys as the format has them: a preset's are flat, a device profile's deepest "
                              "are [speed.t2] then read_gbs = { Q8_0 = 12.5 }")
    try:
        data = tomllib.loads(text)
    except RecursionError:  # nesting the scan above did not see (it never should)
        raise PresetError("values nested too deeply for the TOML reader", where=label,
                          fix=f"A {kind} holds plain values and flat lists: remove the extra brackets") from None
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        position = _SYNTAX_POSITION.search(message)
        where = f"{label}:{position.group(1)}:{position.group(2)}" if position else label
        what = _SYNTAX_POSITION.sub("", message).strip()
        raise PresetError(f"not valid TOML: {what}", where=where,
                          fix='Fix the syntax on that line (text values need quotes, e.g. weights = "Q4_K_M")') from None
    return data, TomlSource(label, text)


def _read_small_file(path: Path, kind: str, label: str) -> bytes:
    """The bytes of a regular file of at most MAX_TOML_BYTES, opened without ever blocking.

    A FIFO would block a plain read for ever and /dev/zero never ends: O_NONBLOCK opens
    either at once, and fstat on the descriptor says what was opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        special = special_file_kind(info.st_mode)
        if special is not None:
            raise PresetError(f"is {special}, not a {kind} file", where=label, fix=f"Give the path of a {kind} .toml file")
        if info.st_size > MAX_TOML_BYTES:
            raise PresetError(f"is {info.st_size:,} bytes; a {kind} file takes a few hundred", where=label,
                              fix=f"Give the path of a {kind} .toml file")
        os.set_blocking(fd, True)
        return stream.read(MAX_TOML_BYTES + 1)[:MAX_TOML_BYTES]


def closest(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The choice `word` was most likely meant to be, or None if nothing is close."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if matches:
        return matches[0]
    lowered = {choice.lower(): choice for choice in choices}
    matches = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    if matches:
        return lowered[matches[0]]
    # A short word is often the start of the long name ("jetson", "power").
    containing = [choice for lower, choice in lowered.items() if len(word) >= 3 and word.lower() in lower]
    return containing[0] if containing else None


def check_known_keys(data: dict[str, Any], known: tuple[str, ...], source: TomlSource, kind: str,
                     table: str | None = None) -> None:
    """Reject keys the format does not have, suggesting the closest known one."""
    for key in data:
        if key in known:
            continue
        guess = closest(key, known)
        hint = f'Did you mean "{guess}"? ' if guess else ""
        place = f" in [{table}]" if table else ""
        raise PresetError(f'unknown key "{key}"{place} in this {kind}', where=source.where(key, table),
                          fix=f"{hint}Known keys: {', '.join(known)}")


# bool first: in Python a bool is also an int.
_TYPE_NAMES = ((bool, "a true/false value"), (int, "a whole number"), (float, "a decimal number"),
               (str, "a text value"), (dict, "a table"), (list, "a list"))


def _type_name(value: Any) -> str:
    return next((name for kind, name in _TYPE_NAMES if isinstance(value, kind)), type(value).__name__)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def wrong_type(key: str, value: Any, expected: str, example: str, source: TomlSource,
               table: str | None = None) -> PresetError:
    """The error for `key = value` holding the wrong kind of value."""
    return PresetError(f"{key} = {_shown(value)} is {_type_name(value)}, expected {expected}",
                       where=source.where(key, table), fix=f"Write it like {example}")


def get_int(data: dict[str, Any], key: str, default: int | None, source: TomlSource, *,
            minimum: int, maximum: int, example: str, unit: str = "",
            table: str | None = None) -> int:
    """A whole number in [minimum, maximum]; `default` when absent (None = required)."""
    if key not in data:
        if default is None:
            raise PresetError(f"missing {key}", where=source.where(), fix=f"Add a line like {example}")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(key, value, "a whole number" + (f" of {unit}" if unit else ""), example, source, table)
    if not minimum <= value <= maximum:
        bound = f"below the minimum of {minimum}" if value < minimum else f"above the maximum of {maximum}"
        raise PresetError(f"{key} = {value} is {bound}", where=source.where(key, table),
                          fix=f"Use a value from {minimum} to {maximum}, e.g. {example}")
    return value


def get_number(data: dict[str, Any], key: str, default: float | None, source: TomlSource, *,
               minimum_exclusive: float, maximum: float, example: str,
               required: bool = False) -> float | None:
    """A positive number (whole or decimal) up to `maximum`; `default` when absent."""
    if key not in data:
        if required:
            raise PresetError(f"missing {key}", where=source.where(), fix=f"Add a line like {example}")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(key, value, "a number", example, source)
    if not minimum_exclusive < value <= maximum:
        raise PresetError(f"{key} = {value} is out of range", where=source.where(key),
                          fix=f"Use a value above {minimum_exclusive:g} and at most {maximum:g}, e.g. {example}")
    return float(value)


def get_str(data: dict[str, Any], key: str, default: str, source: TomlSource, *, example: str) -> str:
    """A text value; `default` when absent."""
    if key not in data:
        return default
    value = data[key]
    if not isinstance(value, str):
        raise wrong_type(key, value, "a text value in quotes", example, source)
    return value


def get_bool(data: dict[str, Any], key: str, default: bool, source: TomlSource) -> bool:
    """A true/false value (TOML booleans only: "yes" or 1 are mistakes worth pointing out)."""
    if key not in data:
        return default
    value = data[key]
    if not isinstance(value, bool):
        raise wrong_type(key, value, "true or false", f"{key} = true", source)
    return value


def looks_like_path(spec: str) -> bool:
    """Whether a preset/device spec names a file rather than a catalogue entry."""
    return spec.endswith(".toml") or "/" in spec or os.sep in spec or os.path.isfile(spec)


def catalog_files(shipped: Path, user: Path) -> dict[str, Path]:
    """Name (file stem) -> TOML file, shipped first so user files of the same name replace them."""
    files: dict[str, Path] = {}
    for folder in (shipped, user):
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                files[path.stem] = path
    return files


def catalog_origin(source: str, shipped: Path, user: Path) -> str:
    """"shipped", "user", "file" (a TOML elsewhere) or "built-in" (no file) for a loaded entry."""
    if not source:
        return "built-in"
    folder = Path(source).resolve().parent
    if folder == user.resolve():
        return "user"
    if folder == shipped.resolve():
        return "shipped"
    return "file"


def text_of(source: str) -> str:
    """The text of `source` when it names a readable file (for error lines), else ""."""
    if not source or not os.path.isfile(source):
        return ""
    try:
        return Path(source).read_text(encoding="utf-8-sig")  # as read_toml reads it: a BOM is no character
    except (OSError, UnicodeDecodeError):
        return ""


def load_entry_file(path: Path, kind: str, build: Callable[..., Entry], *, catalog: bool) -> Entry:
    """Read and check one TOML file with `build(data, source, default_name=...)`.

    In a catalogue folder entries are found by file name, so there the `name` inside
    must match it.
    """
    data, source = read_toml(path, kind)
    entry = build(data, source, default_name=path.stem)
    name = getattr(entry, "name")
    if catalog and name != path.stem:
        raise PresetError(f'name = "{name}" differs from the file name {path.name}', where=source.where("name"),
                          fix=f'{kind.capitalize()}s are found by file name: rename the file to {name}.toml '
                              f'or set name = "{path.stem}"')
    return dataclasses.replace(entry, source=str(path))


def unknown_name(spec: str, names: list[str], kind: str) -> PresetError:
    """The error for a name that is no file and not in the catalogue, with the closest name."""
    guess = closest(spec, names)
    hint = f'Did you mean "{guess}"? ' if guess else ""
    return PresetError(f'unknown {kind} "{spec}"',
                       fix=f"{hint}Known {kind}s: {', '.join(names)}; or give a path to a .toml file")


@dataclass(frozen=True)
class BrokenFile:
    """A catalogue file that does not load: listed with its reason instead of failing the whole list."""

    path: str
    error: str  # the one-line error: file:line, what is wrong, what to do

    @property
    def line(self) -> str:
        return f"broken: {self.error}"


@dataclass(frozen=True)
class Catalog(Generic[Entry]):
    """The entries of a catalogue folder pair that load, and the files that do not."""

    entries: tuple[Entry, ...]
    broken: tuple[BrokenFile, ...] = ()


def load_catalog(files: dict[str, Path], load: Callable[[Path], Entry]) -> Catalog[Entry]:
    """`load` every file by name; one malformed file is named in `broken`, the others still load."""
    entries, broken = [], []
    for name in sorted(files):
        path = files[name]
        try:
            entries.append(load(path))
        except PresetError as error:
            broken.append(BrokenFile(str(path), str(error) if error.where else f"{path}: {error}"))
    return Catalog(tuple(entries), tuple(broken))
