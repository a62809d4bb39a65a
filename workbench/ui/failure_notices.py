"""What the chat says when the engine process dies: a title, the details under it, and a toast."""

from __future__ import annotations

from workbench.core.engine.events import EngineFailed
from workbench.core.ledger.types import Ledger
from workbench.core.units import mib


def how_it_died(failure: EngineFailed) -> str:
    return failure.exit_signal or (f"exit code {failure.exit_code}" if failure.exit_code is not None else failure.kind)


INTERRUPTED_LEFT_OUT = ("The interrupted question and its partial answer stay in the transcript (marked) but are "
                        "left out of the model's context from now on: it will not see them.")
UNANSWERED_PUT_BACK = "The unanswered question is back in the prompt box, not in the model's context: Enter sends it again."


def died_notice(failure: EngineFailed, ledger: Ledger | None, *, interrupted: bool = False) -> tuple[str, str]:
    """The notice's title and details: llama.cpp's last log lines beside what the ledger predicted, and what
    became of the turn the death interrupted (`interrupted`: its partial answer is in the conversation)."""
    prediction = failure.prediction or (
        f"the ledger predicted {mib(ledger.total_bytes)} of {mib(ledger.budget_bytes)}"
        if ledger else "no ledger prediction")
    details = "\n".join(["last llama.cpp log lines:", *failure.log_tail[-8:], f"prediction: {prediction}",
                         INTERRUPTED_LEFT_OUT if interrupted else UNANSWERED_PUT_BACK,
                         "The conversation is kept; Restart engine (Ctrl+R) loads the model again."])
    return f"Engine died ({how_it_died(failure)}): {failure.message}", details


def died_toast(failure: EngineFailed) -> str:
    return f"{how_it_died(failure)}: {failure.message}"


def restarted_notice(failure: EngineFailed) -> tuple[str, str]:
    """The notice's title and details when a cancel went unanswered and the app restarts the engine itself."""
    details = "\n".join(["last llama.cpp log lines:", *failure.log_tail[-8:],
                          "A fresh engine loads the same model and preset; the conversation is kept."])
    return f"Engine restarted: {failure.message}", details
