"""The one error type the user sees: what is wrong, where, and what to do."""

from __future__ import annotations


class WorkbenchError(Exception):
    """A problem the user can act on. `str()` is one line: what, where, fix.

    `where` names the file (and line or byte offset) when there is one; `fix` says what
    to do next. The UI and CLI print `str(error)`; no traceback reaches the user.
    """

    def __init__(self, what: str, *, where: str = "", fix: str = "") -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = f"{self.where}: {self.what}" if self.where else self.what
        return f"{text}. {self.fix}" if self.fix else text


class GGUFError(WorkbenchError):
    """A GGUF file that cannot be read: wrong magic, truncated, absurd counts, ..."""


class PresetError(WorkbenchError):
    """A preset or device profile that is unknown, malformed or impossible."""


class EngineError(WorkbenchError):
    """The engine process failed: load error, crash, refused request."""


class HubError(WorkbenchError):
    """The model hub could not be reached or refused a request."""
