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

    def add_user(self, text: str) -> None:
        self.messages.append(ChatMessage("user", text))

    def add_answer(self, finished: TurnFinished) -> None:
        self.messages.append(ChatMessage("assistant", finished.text))
        self.stats[len(self.messages) - 1] = finished

    def drop_unanswered(self) -> str:
        """Remove a trailing user message the engine never answered; return its text."""
        if self.messages and self.messages[-1].role == "user":
            return self.messages.pop().content
        return ""

    def for_engine(self) -> list[ChatMessage]:
        """What the engine is sent: the system prompt (when set) then every message."""
        system = [ChatMessage("system", self.system_prompt)] if self.system_prompt.strip() else []
        return system + list(self.messages)

    def clear(self) -> None:
        self.messages.clear()
        self.stats.clear()


def stats_line(finished: TurnFinished) -> str:
    """The one line under each answer: where its tokens and time went."""
    parts = [
        f"prompt {finished.prompt_tokens} tok",
        f"reused {finished.reused_tokens}",
        f"generated {finished.generated_tokens}",
        f"TTFT {finished.ttft_s * 1000:,.0f} ms",
        f"prefill {finished.prefill_tps:,.1f} tok/s" if finished.prefill_tps > 0 else "prefill n/a",
        f"decode {finished.decode_tps:,.1f} tok/s" if finished.decode_tps > 0 else "decode n/a",
        f"stop: {finished.stop_reason}",
    ]
    if finished.context_shifts:
        parts.append(f"context shifted ({finished.context_shifts} turns dropped)")
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
    return markdown_path, json_path
