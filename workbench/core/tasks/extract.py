"""Answer extractors: the number a model's free-text answer gives, in canonical form, or None."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# a number as a model writes it: sign, digits with optional thousands commas, optional decimals
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
# "the answer is 12", "= 12", "Answer: 12": an explicit marker wins over the first number seen
_MARKED = re.compile(r"(?:answer\s*(?:is|:)|=)\s*\**\s*(-?[\d,]+(?:\.\d+)?)", re.IGNORECASE)
MAX_ANSWER_CHARS = 4000  # a sample longer than this is cut before the regex runs (hostile or runaway text)


def canonical_number(text: str) -> str | None:
    """'1,200.50' -> '1200.5', '007' -> '7', '3.0' -> '3'; None when it is not a number."""
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    normal = value.normalize()
    if normal == normal.to_integral_value():
        return str(int(normal))
    return format(normal, "f")


def first_number(text: str) -> str | None:
    """The answer's number: after an explicit 'answer is' / '=' marker if there is one, else the first number.

    The first, not the last: a small model states its answer first and then rambles
    ("5. The next number is 6 ...").
    """
    text = text[:MAX_ANSWER_CHARS]
    marked = _MARKED.search(text)
    if marked:
        found = canonical_number(marked.group(1).rstrip(","))
        if found is not None:
            return found
    match = _NUMBER.search(text)
    return canonical_number(match.group(0)) if match else None
