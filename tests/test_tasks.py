"""Task core: deterministic generators with right answers, extractors, majority vote, Wilson, Pareto, rows."""

import csv
import io
import json

import pytest

from workbench.core.errors import WorkbenchError
from workbench.core.tasks.extract import MAX_ANSWER_CHARS, canonical_number, first_number
from workbench.core.tasks.registry import TASKS, find_task
from workbench.core.tasks.results import (
    TASK_ROW_FIELDS,
    TaskRow,
    render_task_rows,
    task_row_from_dict,
    with_pareto,
)
from workbench.core.tasks.stats import pareto_front, wilson_interval
from workbench.core.tasks.vote import SampledAnswer, majority_vote


def test_generators_are_deterministic_and_prefix_stable():
    for task in TASKS.values():
        assert task.generate(20, 7) == task.generate(20, 7)
        assert task.generate(5, 7) == task.generate(20, 7)[:5]  # --limit takes the first K of the same list
        assert task.generate(20, 7) != task.generate(20, 8)


def test_generated_answers_are_right():
    # recompute each answer from the question text alone, independently of the generator's bookkeeping
    import re
    from decimal import Decimal

    for q in TASKS["add-small"].generate(30, 0):
        a, b = map(int, re.fullmatch(r"What is (\d) \+ (\d)\?", q.prompt).groups())
        assert int(q.answer) == a + b
    for q in TASKS["word-problems"].generate(30, 0):
        count = int(re.search(r"has (\d+)", q.prompt).group(1))
        for verb, n in re.findall(r"(gets|gives away) (\d+)", q.prompt):
            count += int(n) if verb == "gets" else -int(n)
            assert count > 0
        assert int(q.answer) == count
    factors = {("minutes", "hours"): 60, ("centimetres", "metres"): 100, ("bytes", "kibibytes"): 1024}
    for q in TASKS["unit-convert"].generate(60, 0):
        up = re.fullmatch(r"How many (\w+) are in ([\d.]+) (\w+)\?", q.prompt)
        down = re.fullmatch(r"How many (\w+) make ([\d.]+) (\w+)\?", q.prompt)
        if up and (up.group(1), up.group(3)) in factors:
            assert Decimal(q.answer) == Decimal(up.group(2)) * factors[(up.group(1), up.group(3))]
        if down and (down.group(3), down.group(1)) in factors:
            assert Decimal(q.answer) * factors[(down.group(3), down.group(1))] == Decimal(down.group(2))


@pytest.mark.parametrize("text, expected", [
    ("12", "12"),
    ("The answer is 12.", "12"),
    ("6 + 4 = 10", "10"),  # the marker wins over the operands
    ("**Answer:** 15 apples", "15"),
    ("1,500 grams", "1500"),
    ("6.50 hours", "6.5"),
    ("3.0", "3"),
    ("-3", "-3"),
    ("10. Then 11 comes next", "10"),  # the first number: small models state the answer, then ramble
    ("seven", None),
    ("", None),
    ("v2", None),  # part of a word, not a number
])
def test_first_number(text, expected):
    assert first_number(text) == expected


def test_extractor_cuts_runaway_text():
    assert first_number("x" * (MAX_ANSWER_CHARS + 10) + " 5") is None
    assert canonical_number("NaN") is None and canonical_number("Infinity") is None


def sample(answer, logprob):
    return SampledAnswer(text=str(answer), answer=answer, logprob=logprob, n_tokens=2)


def test_majority_vote():
    result = majority_vote([sample("5", -1.0), sample("6", -0.5), sample("5", -2.0), sample(None, -0.1)])
    assert result.answer == "5" and not result.tie_broken and result.unparseable == 1
    assert [(c.answer, c.votes, c.logprob_sum) for c in result.counts] == [("5", 2, -3.0), ("6", 1, -0.5)]


def test_tie_goes_to_the_larger_summed_logprob():
    result = majority_vote([sample("5", -4.0), sample("6", -1.0), sample("6", -2.5), sample("5", -0.2)])
    # 5: -4.0 + -0.2 = -4.2; 6: -1.0 + -2.5 = -3.5 -> 6 wins the 2-2 tie
    assert result.answer == "6" and result.tie_broken


def test_all_unparseable_votes_for_nothing():
    result = majority_vote([sample(None, -1.0), sample(None, -2.0)])
    assert result.answer is None and result.unparseable == 2 and result.counts == ()


def test_wilson_interval_matches_newcombe_1998():
    # Newcombe, Statistics in Medicine 17 (1998) 857-872, Table I, method 3 (score, no continuity correction)
    cases = {(81, 263): (0.2553, 0.3662), (15, 148): (0.0624, 0.1605), (0, 20): (0.0, 0.1611), (1, 29): (0.0061, 0.1718)}
    for (k, n), (low, high) in cases.items():
        got = wilson_interval(k, n)
        assert got[0] == pytest.approx(low, abs=1e-4) and got[1] == pytest.approx(high, abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_pareto_front():
    points = [("a", 1.0, 0.5), ("b", 2.0, 0.7), ("c", 3.0, 0.6), ("d", 2.0, 0.5), ("e", None, 0.9)]
    front = pareto_front(points, lambda p: p[1], lambda p: p[2])
    assert [p[0] for p in front] == ["a", "b"]  # c costs more for less; d costs more for the same; e has no cost


def row(**changes):
    values = dict(task="add-small", preset="as-is", weights="keep", model="m.gguf", device="host", samples=1,
                  questions=10, correct=5, accuracy=0.5, accuracy_ci=(0.2366, 0.7634), unparseable=1,
                  seconds_per_question=0.5, tokens_per_question=4.0, joules_per_question=None, power_w=None,
                  n_threads=2, unavailable=(("joules_per_question", "no power source on this machine"),
                                            ("power_w", "no power source on this machine")))
    values.update(changes)
    return TaskRow(**values)


def test_rows_in_every_format_carry_the_task_fields():
    rows = with_pareto((row(), row(samples=8, correct=8, accuracy=0.8, seconds_per_question=1.5)))
    assert [r.pareto_latency for r in rows] == [True, True]
    required = {"task", "samples", "accuracy", "accuracy_ci", "seconds_per_question", "tokens_per_question",
                "joules_per_question"}
    document = json.loads(render_task_rows(rows, "json", {"label": "host"}))
    assert required <= set(document["rows"][1])
    assert document["rows"][1]["joules_per_question"] is None
    assert document["rows"][1]["unavailable"]["joules_per_question"] == "no power source on this machine"
    assert task_row_from_dict(document["rows"][1]) == rows[1]
    lines = render_task_rows(rows, "jsonl", {"label": "host"}).splitlines()
    assert required <= set(json.loads(lines[0]))
    table = list(csv.DictReader(io.StringIO(render_task_rows(rows, "csv", {}))))
    assert required <= set(table[0]) and table[0]["joules_per_question"] == "n/a"
    assert set(TASK_ROW_FIELDS) == set(table[0])
    md = render_task_rows(rows, "md", {})
    assert "0.80 (8/10)" in md and "n/a [1]" in md and "[1] no power source on this machine" in md


def test_unknown_task_is_one_clear_error():
    with pytest.raises(WorkbenchError) as error:
        find_task("gsm9k")
    assert "add-small" in str(error.value)


def test_power_cap_picks_the_most_accurate_point_under_it():
    from workbench.core.tasks.power_cap import choose_under_cap

    rows = [row(samples=1, accuracy=0.5, power_w=4.0, joules_per_question=2.0, unavailable=()),
            row(samples=8, accuracy=0.8, power_w=9.5, joules_per_question=12.0, unavailable=()),
            row(samples=4, accuracy=0.7, power_w=6.0, joules_per_question=5.0, cpu_max_khz=1_200_000, unavailable=())]
    choice = choose_under_cap(rows, 7.0)
    assert choice.row is rows[2] and "N=4" in choice.message and "1200 MHz" in choice.message
    assert choose_under_cap(rows, 10).row is rows[1]
    none_under = choose_under_cap(rows, 3.0)
    assert none_under.row is None and "lowest" in none_under.message and "4.00 W" in none_under.message


def test_power_cap_without_a_power_source_says_it_cannot_choose():
    from workbench.core.tasks.power_cap import choose_under_cap

    choice = choose_under_cap([row(), row(samples=8)], 15.0)
    assert choice.row is None
    assert "cannot be made here" in choice.message and "no power source on this machine" in choice.message


def test_battery_figures():
    from workbench.core.tasks.battery import answers_per_charge, battery_hours, battery_line

    assert battery_hours(99.9, 10.0) == pytest.approx(9.99)  # 99.9 Wh / 10 W
    assert answers_per_charge(50.0, 18.0) == pytest.approx(10_000)  # 50 Wh = 180,000 J; / 18 J
    assert battery_line(None, 5.0, None) == "battery: the device profile gives no battery_wh"
    assert "need a power reading" in battery_line(50.0, None, None)
    assert battery_line(50.0, 10.0, 18.0) == (
        "battery 50 Wh: 5.0 h of generation at 10.0 W, ~10,000 answers like the last per charge")


def test_device_profiles_take_a_checked_battery_wh(tmp_path):
    from workbench.core.config.devices import load_device
    from workbench.core.errors import PresetError

    base = 'name = "pack"\nram_total_mb = 8192\nmem_bandwidth_gbs = 17\ncores = 4\n'
    good = tmp_path / "pack.toml"
    good.write_text(base + "battery_wh = 99.9\n")
    assert load_device(str(good)).battery_wh == 99.9
    bad = tmp_path / "bad.toml"
    bad.write_text(base + "battery_wh = -5\n")
    with pytest.raises(PresetError) as error:
        load_device(str(bad))
    assert "battery_wh" in str(error.value) and "\n" not in str(error.value)
