"""The context search finds the largest fitting context, from either end, with few tests near the top."""

import math

from workbench.core.ledger.ctx_search import largest_fitting_ctx
from workbench.core.ledger.kv_layers import CTX_PAD


def search(answer: int, high: int, near_top: bool) -> tuple[int, list[int]]:
    """The search's answer and the contexts it tested, for a test that holds up to `answer` steps."""
    asked: list[int] = []

    def fits(ctx: int) -> bool:
        assert ctx % CTX_PAD == 0 and CTX_PAD <= ctx <= high * CTX_PAD  # never outside the range
        asked.append(ctx)
        return ctx <= answer * CTX_PAD

    return largest_fitting_ctx(fits, high, near_top=near_top), asked


def test_every_answer_in_every_range_is_found_either_way():
    for high in (0, 1, 2, 3, 5, 17, 64, 300):
        for answer in range(high + 1):
            for near_top in (False, True):
                found, asked = search(answer, high, near_top)
                assert found == answer * CTX_PAD, (high, answer, near_top)
                assert len(asked) == len(set(asked))  # no context tested twice
                halvings = math.ceil(math.log2(high + 1))
                assert len(asked) <= (2 * halvings if near_top else halvings), (high, answer, near_top, asked)


def test_near_the_top_an_answer_just_below_the_bound_takes_few_tests():
    for answer, most in ((300, 1), (299, 2), (297, 4), (290, 8)):
        found, asked = search(answer, 300, near_top=True)
        assert found == answer * CTX_PAD and len(asked) <= most, (answer, asked)
