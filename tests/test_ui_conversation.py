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
    assert "stop: cancelled" in line and "2 turns dropped" in line
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
