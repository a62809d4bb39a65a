"""Read a file a user named, in bounded memory, refusing a FIFO or a device before it blocks or never ends."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.files.model_ref import special_file_kind
from workbench.core.units import MIB


def read_regular_file(path: str | os.PathLike[str], *, max_bytes: int, what: str, fix: str) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes` of it (a larger one is refused).

    O_NONBLOCK opens a FIFO at once (a plain open waits for a writer for ever) and fstat on
    the descriptor says what was really opened; /dev/zero reports size 0 and never ends, so the
    read itself is bounded too. `what` names the file in the error ("a results file").
    OSError (missing file, permission, a folder) is left to the caller, who knows the words.
    """
    source = Path(path)
    fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(fd)
        kind = special_file_kind(info.st_mode)
        if kind is not None:
            raise WorkbenchError(f"is {kind}, not {what}", where=str(source), fix=fix)
        if info.st_size > max_bytes:
            raise WorkbenchError(f"{info.st_size / MIB:.1f} MiB is too large for {what} (at most {max_bytes / MIB:.0f} MiB)",
                                 where=str(source), fix=fix)
        os.set_blocking(fd, True)
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while we read it
        raise WorkbenchError(f"more than {max_bytes / MIB:.0f} MiB is too large for {what}", where=str(source), fix=fix)
    return data
