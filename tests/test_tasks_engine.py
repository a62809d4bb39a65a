"""The task bench on the real engine and the bundled model: N = 1 and N = 8 samples decoded together."""

from __future__ import annotations

import json

import pytest

from workbench.core.bench.task_sweep import TaskPointMeasured, TaskSweepConfig, TaskSweepFinished, run_task_sweep
from workbench.core.config.devices import load_device
from workbench.core.engine.events import Sampling
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset
from workbench.core.tasks.registry import find_task

PRESET = Preset("task-test", ctx_size=1024, batch_size=256, ubatch_size=256, threads=1)


@pytest.fixture(scope="module")
def sweep():
    config = TaskSweepConfig(bundled_model_path(), (PRESET,), load_device("host"), find_task("add-small"),
                             samples=(1, 8), limit=3, seed=3)
    return list(run_task_sweep(config))


def test_n1_and_n8_points_with_votes_and_honest_units(sweep):
    finished = sweep[-1]
    assert isinstance(finished, TaskSweepFinished) and not finished.failures
    rows = {row.samples: row for row in finished.rows}
    assert set(rows) == {1, 8}
    points = [e for e in sweep if isinstance(e, TaskPointMeasured)]
    by_n = {p.row.samples: p for p in points}
    for n, row in rows.items():
        assert row.questions == 3 and row.task == "add-small" and row.n_threads == 1
        assert row.correct == sum(o.correct for o in by_n[n].outcomes)
        assert all(len(o.answers) == n for o in by_n[n].outcomes)
        # what the vote said is what was compared with the generated answer
        for outcome in by_n[n].outcomes:
            assert outcome.correct == (outcome.voted == outcome.expected)
        # this machine has no power source: energy is unavailable with a reason, never 0
        if row.power_w is None:
            assert row.joules_per_question is None and row.why_unavailable("joules_per_question")
    # the prompt is evaluated once per question whatever N: llama.cpp's own token count, less the
    # sampled tokens fed back, is exactly one prompt's worth (N separate runs would make it 8)
    assert rows[8].prompt_evals_per_question == 1.0
    assert rows[1].prompt_evals_per_question == 1.0
    # 8 samples generate about 8x the tokens ...
    assert rows[8].tokens_per_question > 4 * rows[1].tokens_per_question
    # ... in far fewer llama_decode calls than tokens: each call carries one token of every live sequence
    assert rows[8].decode_calls_per_question < rows[8].tokens_per_question / 2


def test_n8_decodes_in_as_many_calls_as_n1():
    """Long answers cut at max_tokens: N=8 makes 8x the tokens with the same number of llama_decode calls."""
    from workbench.core.engine.client import EngineClient

    from workbench.core.engine.events import ChatMessage

    prompt = [ChatMessage("user", "Write a long story about a lighthouse keeper.")]
    sampling = Sampling(temperature=0.8, seed=11, max_tokens=16, repeat_penalty=1.0)
    with EngineClient() as client:
        client.load_blocking(bundled_model_path(), PRESET, allow_overbudget=True)
        one = client.sample_n(prompt, 1, sampling)
        eight = client.sample_n(prompt, 8, sampling)
    assert len(eight.samples) == 8 and one.samples[0].generated_tokens >= 1
    lengths = [s.generated_tokens for s in eight.samples]
    # one llama_decode for the prompt, then one per step carrying every live sequence's token:
    # the calls follow the longest sample, not the sum of all eight
    assert eight.decode_calls <= 1 + max(lengths)
    assert sum(lengths) > 2 * eight.decode_calls
    assert eight.max_batch_sequences == 8
    # llama.cpp evaluated the prompt once: what it evaluated beyond the generated tokens is one prompt
    assert eight.llama_tokens_evaluated - sum(lengths) <= eight.prompt_tokens


def test_cli_task_bench_json_rows_and_unparseable_shown(tmp_path, cli):
    out = tmp_path / "task.json"
    # no --presets: the model as it is (as-is)
    done = cli("bench", "--task", "add-small", "--samples", "2", "--limit", "2", "--output", "json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    row = document["rows"][0]
    for key in ("task", "samples", "accuracy", "accuracy_ci", "seconds_per_question", "tokens_per_question",
                "joules_per_question"):
        assert key in row
    assert row["samples"] == 2 and len(row["accuracy_ci"]) == 2 and row["preset"] == "as-is"
    assert len(document["questions"]) == 1 and len(next(iter(document["questions"].values()))) == 2
    # N samples are N sequences of one context: the ledger was printed for them
    assert "ledger for 2 sequences (as-is, ctx" in done.stderr


def test_cli_task_list_and_bad_input_are_one_line(cli):
    listed = cli("bench", "--task", "list")
    assert listed.returncode == 0 and "add-small" in listed.stdout and "word-problems" in listed.stdout
    for argv, said in ((["--task", "gsm9k", "--presets", "as-is"], "unknown task"),
                       (["--task", "add-small", "--presets", "as-is", "--samples", "0"], "--samples"),
                       (["--power-cap", "5", "--presets", "as-is"], "--task")):
        bad = cli("bench", *argv)
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
