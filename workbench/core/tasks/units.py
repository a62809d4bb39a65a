"""Generated unit-conversion word problems with exact answers (metric prefixes, time, data sizes)."""

from __future__ import annotations

import random
from decimal import Decimal

from workbench.core.tasks.arithmetic import GENERATED, NUMBER_ONLY
from workbench.core.tasks.extract import canonical_number, first_number
from workbench.core.tasks.questions import Question, Task

# (from unit, to unit, factor): exact factors only, so every answer is an exact decimal
_CONVERSIONS = (
    ("metres", "centimetres", 100),
    ("kilometres", "metres", 1000),
    ("kilograms", "grams", 1000),
    ("litres", "millilitres", 1000),
    ("hours", "minutes", 60),
    ("minutes", "seconds", 60),
    ("days", "hours", 24),
    ("weeks", "days", 7),
    ("kibibytes", "bytes", 1024),
    ("watts", "milliwatts", 1000),
)


def unit_questions(count: int, seed: int) -> tuple[Question, ...]:
    """Half the questions convert up (3 hours -> 180 minutes), half down (180 minutes -> 3 hours)."""
    rng = random.Random(f"unit-convert:{seed}")
    questions = []
    for index in range(count):
        big, small, factor = rng.choice(_CONVERSIONS)
        amount = rng.choice((rng.randint(2, 12), Decimal(rng.randint(3, 19)) / 2))
        big_amount = canonical_number(str(amount))
        small_amount = canonical_number(str(Decimal(amount) * factor))
        if rng.random() < 0.5:
            prompt, answer = f"How many {small} are in {big_amount} {big}?", small_amount
        else:
            prompt, answer = f"How many {big} make {small_amount} {small}?", big_amount
        assert answer is not None
        questions.append(Question("unit-convert", index, prompt, answer))
    return tuple(questions)


UNIT_CONVERT = Task(
    name="unit-convert",
    description="unit conversions in one step: metric prefixes, time, bytes (\"How many minutes are in 3 hours?\")",
    source=GENERATED,
    instruction=NUMBER_ONLY,
    generate=unit_questions,
    extract=first_number,
)
