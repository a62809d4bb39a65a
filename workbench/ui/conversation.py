"""The conversation the UI keeps across unloads and engine crashes, and its transcript files."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly."


@dataclass
class Conversation:
    """System prompt, messages in order, and the engine's stats for each answer."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    sampling: Sampling = field(default_factory=Sampling)
    messages: list[ChatMessage] = field(default_factory=list)
    stats: dict[int, TurnFinished] = field(default_factory=dict)  # message index -> its turn
    model_name: str = ""
    preset_name: str = ""
    # answer index -> why it stopped short (the engine died): kept for the transcript, never re-sent
    interrupted: dict[int, str] = field(default_factory=dict)
    # Turns the model no longer sees. A new engine process knows nothing of the turns its
    # predecessor had dropped and would fit the whole conversation afresh (down to half the
    # context); leaving out what the old one had left out keeps the history it still saw.
    turns_out_of_context: int = 0
    skipped_turns: int = 0  # oldest turns not sent to the current engine (out of context at its load)
    saved_messages: int = 0  # how many messages the last saved transcript held

    @property
    def unsaved(self) -> bool:
        """Whether discarding the conversation now would lose messages no transcript holds."""
        return bool(self.messages) and len(self.messages) != self.saved_messages

    def add_user(self, text: str) -> None:
        self.messages.append(ChatMessage("user", text))

    def add_answer(self, finished: TurnFinished) -> int:
        """Record the answer; return how many turns this turn newly pushed out of the context."""
        self.messages.append(ChatMessage("assistant", finished.text))
        self.stats[len(self.messages) - 1] = finished
        before = self.turns_out_of_context
        self.turns_out_of_context = self.skipped_turns + finished.context_shifts
        return max(0, self.turns_out_of_context - before)

    def add_interrupted(self, partial_text: str, reason: str) -> None:
        """Keep the partial answer of a turn the engine did not finish (in the transcript, not for the model)."""
        self.messages.append(ChatMessage("assistant", partial_text))
        self.interrupted[len(self.messages) - 1] = reason

    @property
    def ends_interrupted(self) -> bool:
        """The last message is the partial answer of an interrupted turn."""
        return len(self.messages) - 1 in self.interrupted

    def drop_unanswered(self) -> str:
        """Remove a trailing user message the engine never answered; return its text."""
        if self.messages and self.messages[-1].role == "user":
            return self.messages.pop().content
        return ""

    def engine_restarted(self) -> None:
        """A model was (re)loaded: its context starts empty, so leave out what the last one had dropped."""
        self.skipped_turns = self.turns_out_of_context

    def for_engine(self) -> list[ChatMessage]:
        """What the engine is sent: the system prompt (when set), then every exchange the model still
        sees: not the ones left out of its context before a restart, not the interrupted ones."""
        system = [ChatMessage("system", self.system_prompt)] if self.system_prompt.strip() else []
        sent: list[ChatMessage] = []
        for index, message in enumerate(self.messages):
            if index in self.interrupted:
                sent.pop()  # the prompt of an interrupted exchange goes with its partial answer
                continue
            sent.append(message)
        starts = [index for index, message in enumerate(sent) if message.role == "user"]
        if 0 < self.skipped_turns < len(starts):
            sent = sent[starts[self.skipped_turns]:]
        return system + sent

    def clear(self) -> None:
        self.messages.clear()
        self.stats.clear()
        self.interrupted.clear()
        self.turns_out_of_context = self.skipped_turns = self.saved_messages = 0


def stats_line(finished: TurnFinished, dropped_now: int | None = None) -> str:
    """The one line under each answer: where its tokens and time went.

    `dropped_now`: turns this turn pushed out of the context (the engine reports the total out)."""
    parts = [
        f"prompt {finished.prompt_tokens} tok",
        f"reused {finished.reused_tokens}",
        f"generated {finished.generated_tokens}",
        f"TTFT {finished.ttft_s * 1000:,.0f} ms",
        f"prefill {finished.prefill_tps:,.1f} tok/s" if finished.prefill_tps > 0 else "prefill n/a",
        f"decode {finished.decode_tps:,.1f} tok/s" if finished.decode_tps > 0 else "decode n/a",
        f"stop: {finished.stop_reason}",
    ]
    dropped = finished.context_shifts if dropped_now is None else dropped_now
    if dropped:
        parts.append(f"context shifted ({dropped} earlier {'turn' if dropped == 1 else 'turns'} dropped)")
    if finished.answer_note:
        parts.append(finished.answer_note)
    return " · ".join(parts)


def transcript_markdown(conversation: Conversation) -> str:
    lines = ["# Workbench transcript", ""]
    if conversation.model_name:
        lines.append(f"- model: `{conversation.model_name}`")
    if conversation.preset_name:
        lines.append(f"- preset: `{conversation.preset_name}`")
    sampling = conversation.sampling
    lines.append(
        f"- sampling: temperature {sampling.temperature}, top_p {sampling.top_p}, top_k {sampling.top_k}, "
        f"min_p {sampling.min_p}, repeat_penalty {sampling.repeat_penalty}, seed {sampling.seed}, "
        f"max_tokens {sampling.max_tokens}"
    )
    lines += ["", "## System", "", conversation.system_prompt or "(none)", ""]
    for index, message in enumerate(conversation.messages):
        lines += [f"## {'User' if message.role == 'user' else 'Assistant'}", "", message.content, ""]
        if index in conversation.interrupted:
            lines += [f"_interrupted: {conversation.interrupted[index]} (partial answer)_", ""]
        if index in conversation.stats:
            lines += [f"_{stats_line(conversation.stats[index])}_", ""]
    return "\n".join(lines)


def transcript_json(conversation: Conversation) -> str:
    data = {
        "model": conversation.model_name,
        "preset": conversation.preset_name,
        "system_prompt": conversation.system_prompt,
        "sampling": asdict(conversation.sampling),
        "messages": [
            {"role": message.role, "content": message.content}
            | ({"stats": asdict(conversation.stats[index])} if index in conversation.stats else {})
            | ({"interrupted": conversation.interrupted[index]} if index in conversation.interrupted else {})
            for index, message in enumerate(conversation.messages)
        ],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def save_transcript(conversation: Conversation, base: Path) -> tuple[Path, Path]:
    """Write `base`.md and `base`.json (a given suffix is replaced); return both paths."""
    base = base.with_suffix("") if base.suffix in (".md", ".json") else base
    markdown_path, json_path = base.with_name(base.name + ".md"), base.with_name(base.name + ".json")
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(transcript_markdown(conversation), encoding="utf-8")
    json_path.write_text(transcript_json(conversation), encoding="utf-8")
    conversation.saved_messages = len(conversation.messages)
    return markdown_path, json_path
