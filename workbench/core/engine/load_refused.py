"""The one refusal a load gets before it reaches llama.cpp."""

from __future__ import annotations

# How to load past a "does not fit", named where each front end offers it.
LOAD_ANYWAY = "load anyway with --allow-overbudget (workbench chat, api) or the dialog's Load anyway (the app)"


class LoadRefused(Exception):
    """The load must not reach llama.cpp; `kind` is EngineFailed's ("load" for a bad file, else "refused")."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
