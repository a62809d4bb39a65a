"""Join a name that came from outside (a server, a file, a user) to a folder only when the result stays inside it."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.core.errors import WorkbenchError

NAME_MAX_BYTES = 255  # the longest single name ext4, xfs, btrfs and tmpfs accept
PATH_MAX_BYTES = 4096
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class UnsafePathError(WorkbenchError):
    """A name that would leave its folder (absolute, `..`, a link pointing out) or that no filesystem can hold."""


def name_problem(component: str) -> str | None:
    """Why `component` cannot be one name inside a folder, or None when it can."""
    if not isinstance(component, str):
        return f"is a {type(component).__name__}, not text"
    if component in ("", ".", ".."):
        return "is empty" if not component else f"is {component!r}, which names no file of its own"
    if "/" in component or "\\" in component:
        return "contains a path separator"
    if any(map(is_control_character, component)):
        return "contains a control character"
    try:
        encoded = component.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text"
    if len(encoded) > NAME_MAX_BYTES:
        return f"is {len(encoded)} bytes long (a name holds at most {NAME_MAX_BYTES})"
    return None


def is_control_character(char: str) -> bool:
    """C0, DEL and C1 controls (ESC starts a terminal command; U+009B is CSI to a terminal reading 8-bit
    controls) and the bidi controls that make text read differently from what it is ("…\u202efuggu.gguf")."""
    return ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or char in _BIDI_CONTROLS


def printable_text(text: str) -> str:
    """`text` from a file or a server, fit to print to a terminal: every control character shown as '?'."""
    return "".join("?" if is_control_character(char) else char for char in text)


def relative_parts(relative: str) -> tuple[str, ...]:
    """`a/b/c.gguf` as its names; raises UnsafePathError for an absolute path, `..`, `.`, `//` or a bad name."""
    if not isinstance(relative, str) or not relative:
        raise UnsafePathError(f"the name {shown_value(relative)} is empty")
    if relative.startswith("/"):
        raise UnsafePathError(f"the name {shown_value(relative)} is an absolute path")
    for component in relative.split("/"):
        problem = name_problem(component)
        if problem:
            raise UnsafePathError(f"the name {shown_value(relative)} has a part that {problem}")
    return tuple(relative.split("/"))


def path_inside(root: str | os.PathLike[str], *parts: str, source: str = "") -> Path:
    """`root/part/...`, after proving it stays inside `root`.

    Each part may hold `/`-separated names (a repository path); every name must be a
    plain name (no absolute path, `..`, `.`, empty name, NUL or control character), and
    the joined path with every existing symlink resolved must still lie under the
    resolved root, so a link planted inside the folder cannot lead a write, a replace or
    a delete out of it. Returns the joined path as written (not resolved), so a snapshot
    link keeps its own name. `source` says where the names came from, for the error.
    """
    base = Path(root)
    names: list[str] = []
    for part in parts:
        try:
            names.extend(relative_parts(part))
        except UnsafePathError as error:
            raise _refused(error.what, base, source) from None
    joined = base.joinpath(*names)
    if len(os.fsencode(joined)) > PATH_MAX_BYTES:
        raise _refused(f"the path {shown_value(str(joined))} is longer than {PATH_MAX_BYTES} bytes", base, source)
    real_root = os.path.realpath(base)
    real = os.path.realpath(joined)  # follows every symlink that exists (loops end the walk, never raise)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise _refused(f"{shown_value(str(joined))} leads outside the folder (to {shown_value(real)}) through a symbolic link", base, source)
    if _still_a_link(real, real_root):
        raise _refused(f"{shown_value(str(joined))} runs into a symbolic link loop", base, source)
    return joined


def _still_a_link(real: str, real_root: str) -> bool:
    """A resolved path holds no link, except where realpath gave up: a loop."""
    probe = real
    while len(probe) > len(real_root):
        if os.path.islink(probe):
            return True
        probe = os.path.dirname(probe)
    return False


def _refused(what: str, root: Path, source: str) -> UnsafePathError:
    origin = f" (from {source})" if source else ""
    return UnsafePathError(f"refused {what}{origin}", where=str(root), fix="Nothing was written; remove the link or use a trusted source")


def shown_value(value: object, limit: int = 80) -> str:
    """repr() cut to `limit` characters: a hostile value must not flood the one error line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
