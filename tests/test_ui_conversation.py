"""The conversation the UI keeps: transcripts in Markdown and JSON, stats lines, KV segments."""

import json

from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.ui.conversation import Conversation, save_transcript, stats_line
from workbench.ui.kv_layout import kv_segments


def finished(text="Hi there.", *, prompt=40, reused=0, generated=5, cells=45, stop="stop", shifts=0):
    return TurnFinished(text=text, stop_reason=stop, prompt_tokens=prompt, reused_tokens=reused,
                        generated_tokens=generated, ttft_s=0.25, prefill_tps=400.0, decode_tps=31.5,
                        kv_cells_used=cells, n_ctx=2048, context_shifts=shifts, started_at=1.0, finished_at=2.0)


def test_engine_gets_system_prompt_then_messages_in_order():
    conversation = Conversation(system_prompt="Be brief.")
    conversation.add_user("hello")
    conversation.add_answer(finished("Hi."))
    conversation.add_user("and?")
    assert conversation.for_engine() == [ChatMessage("system", "Be brief."), ChatMessage("user", "hello"),
                                         ChatMessage("assistant", "Hi."), ChatMessage("user", "and?")]
    assert Conversation(system_prompt="  ").for_engine() == []


def test_unanswered_prompt_is_dropped_and_returned_for_resending():
    conversation = Conversation()
    conversation.add_user("first")
    conversation.add_answer(finished())
    conversation.add_user("lost in a crash")
    assert conversation.drop_unanswered() == "lost in a crash"
    assert [m.role for m in conversation.messages] == ["user", "assistant"]
    assert conversation.drop_unanswered() == ""


def test_stats_line_names_every_figure_and_the_stop_reason():
    line = stats_line(finished(prompt=120, reused=80, generated=33, stop="cancelled", shifts=2))
    assert "prompt 120 tok" in line and "reused 80" in line and "generated 33" in line
    assert "TTFT 250 ms" in line and "prefill 400.0 tok/s" in line and "decode 31.5 tok/s" in line
    assert "stop: cancelled" in line and "2 earlier turns dropped" in line
    # the engine reports the total out of the context; the line names what this turn dropped
    assert "1 earlier turn dropped" in stats_line(finished(shifts=6), dropped_now=1)
    assert "context shifted" not in stats_line(finished(shifts=6), dropped_now=0)
    unmeasured = TurnFinished(**{**finished().__dict__, "decode_tps": 0.0})
    assert "decode n/a" in stats_line(unmeasured)


def test_transcript_written_as_markdown_and_json(tmp_path):
    conversation = Conversation(system_prompt="Be brief.", sampling=Sampling(temperature=0.2, max_tokens=64),
                                model_name="SmolLM2", preset_name="as-is")
    conversation.add_user("What is a KV cache?")
    conversation.add_answer(finished("Keys and values of past tokens."))
    markdown_path, json_path = save_transcript(conversation, tmp_path / "talk.md")
    assert (markdown_path.name, json_path.name) == ("talk.md", "talk.json")
    markdown = markdown_path.read_text()
    assert "## User\n\nWhat is a KV cache?" in markdown
    assert "## Assistant\n\nKeys and values of past tokens." in markdown
    assert "temperature 0.2" in markdown and "`as-is`" in markdown
    data = json.loads(json_path.read_text())
    assert data["system_prompt"] == "Be brief."
    assert data["sampling"]["max_tokens"] == 64
    assert data["messages"][1]["stats"]["decode_tps"] == 31.5
    assert "stats" not in data["messages"][0]


def test_kv_segments_split_the_prompt_and_keep_engine_counts():
    conversation = Conversation(system_prompt="S" * 100)
    conversation.add_user("U" * 100)
    conversation.add_answer(finished("A" * 100))
    conversation.add_user("V" * 100)
    turn = finished(prompt=400, reused=180, generated=20, cells=420)
    conversation.add_answer(turn)
    segments = dict(kv_segments(conversation, turn))
    # prompt chars: system 100, history 200, current 100 -> 100 / 200 / 100 of the 400 tokens
    assert segments == {"system": 100, "reused": 80, "history": 120, "current": 120}
    assert sum(segments.values()) == turn.kv_cells_used


def test_kv_segments_scale_to_the_cells_llama_cpp_reports():
    conversation = Conversation(system_prompt="")
    conversation.add_user("hello")
    turn = finished(prompt=100, generated=100, cells=100)
    conversation.add_answer(turn)
    assert kv_segments(conversation, turn) == (("current", 100),)


def test_each_answer_counts_only_the_turns_it_pushed_out():
    conversation = Conversation()
    conversation.add_user("one")
    assert conversation.add_answer(finished(shifts=0)) == 0
    conversation.add_user("two")
    assert conversation.add_answer(finished(shifts=4)) == 4  # the first shift: 4 turns out
    conversation.add_user("three")
    assert conversation.add_answer(finished(shifts=4)) == 0  # still the same 4: nothing new this turn
    conversation.add_user("four")
    assert conversation.add_answer(finished(shifts=6)) == 2


def conversation_of(turns: int) -> Conversation:
    conversation = Conversation(system_prompt="S")
    for number in range(1, turns + 1):
        conversation.add_user(f"q{number}")
        conversation.add_answer(finished(f"a{number}", shifts=0))
    return conversation


def test_a_restarted_engine_is_sent_what_the_old_one_still_saw():
    conversation = conversation_of(5)
    conversation.add_user("q6")
    conversation.add_answer(finished("a6", shifts=3))  # the engine left q1..q3 out of its context
    conversation.engine_restarted()  # a new engine process: it knows nothing of that shift
    conversation.add_user("q7")
    sent = [m.content for m in conversation.for_engine()]
    assert sent == ["S", "q4", "a4", "q5", "a5", "q6", "a6", "q7"]
    # that engine now counts from what it was sent: one more turn out makes 4 in all
    assert conversation.add_answer(finished("a7", shifts=1)) == 1 and conversation.turns_out_of_context == 4
    conversation.engine_restarted()
    conversation.add_user("q8")
    assert [m.content for m in conversation.for_engine()][1:3] == ["q5", "a5"]
    conversation.clear()
    assert (conversation.turns_out_of_context, conversation.skipped_turns) == (0, 0)


def test_an_interrupted_answer_stays_in_the_transcript_but_is_not_sent_again(tmp_path):
    conversation = conversation_of(1)
    conversation.add_user("tell me more")
    conversation.add_interrupted("The ledger sa", "engine process died")
    assert [m.content for m in conversation.for_engine()] == ["S", "q1", "a1"]
    markdown_path, json_path = save_transcript(conversation, tmp_path / "t")
    markdown = markdown_path.read_text()
    assert "## User\n\ntell me more" in markdown and "The ledger sa" in markdown
    assert "_interrupted: engine process died (partial answer)_" in markdown
    messages = json.loads(json_path.read_text())["messages"]
    assert messages[-1] == {"role": "assistant", "content": "The ledger sa", "interrupted": "engine process died"}
