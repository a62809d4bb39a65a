"""`--power-cap W`: the most accurate measured point whose measured power stays under the cap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.core.tasks.results import TaskRow
from workbench.core.units import threads_text


@dataclass(frozen=True)
class CapChoice:
    row: TaskRow | None  # None: no choice could be made
    message: str  # one line: the choice and why, or why none


def _point(row: TaskRow) -> str:
    clock = "as set" if row.cpu_max_khz is None else f"{row.cpu_max_khz / 1000:.0f} MHz"
    governor = f" {row.governor}" if row.governor else ""
    return f"{row.preset}, N={row.samples}, {threads_text(row.n_threads)}, CPU {clock}{governor}"


def choose_under_cap(rows: Sequence[TaskRow], cap_w: float) -> CapChoice:
    """Most accurate under the cap; ties go to the fewer joules, then the fewer seconds per question."""
    if cap_w <= 0:
        raise ValueError("the power cap must be positive")
    measured = [row for row in rows if row.power_w is not None]
    if not measured:
        why = next((row.why_unavailable("power_w") for row in rows if row.why_unavailable("power_w")), "")
        return CapChoice(None, f"the choice under {cap_w:g} W cannot be made here: no power was measured"
                               f"{f' ({why})' if why else ''}; run on a board with a power source")
    under = [row for row in measured if row.power_w <= cap_w]
    if not under:
        lowest = min(measured, key=lambda row: row.power_w)
        return CapChoice(None, f"no measured point stays under {cap_w:g} W; the lowest was {_point(lowest)} "
                               f"at {lowest.power_w:.2f} W: try lower --cpu-max-freq values or fewer threads")
    best = min(under, key=lambda row: (-row.accuracy, row.joules_per_question or 0.0, row.seconds_per_question))
    return CapChoice(best, f"under {cap_w:g} W: {_point(best)} — accuracy {best.accuracy:.2f} "
                           f"({best.correct}/{best.questions}) at {best.power_w:.2f} W, "
                           f"{best.seconds_per_question:.2f} s per question")
