"""How the engine turns a conversation into prompt tokens: the model's template, llama.cpp's built-in one, or plain text."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from workbench.core.config.chat_mode import BUILTIN_TEMPLATE, COMPLETION, TURN_MARKERS, ChatMode, choose_chat_mode
from workbench.core.engine.events import ChatMessage

_PROBE = (ChatMessage("system", "s"), ChatMessage("user", "u"), ChatMessage("assistant", "a"), ChatMessage("user", "v"))


class ChatTemplate:
    """Renders messages as the chosen ChatMode says, then tokenizes.

    The model's own (Jinja) template renders exactly as llama-cpp-python's GGUF chat handler
    does: special tokens are parsed and no BOS is prepended (the template writes it). A
    built-in template is rendered by llama.cpp (llama_chat_apply_template) and, like
    completion mode, tokenized with the model's own BOS rule. In completion mode the prompt
    is the conversation's text run together: the model continues it.
    """

    def __init__(self, llama: Any, forced: str = "") -> None:
        template = llama.metadata.get("tokenizer.chat_template")
        self._llama = llama
        self.mode: ChatMode = choose_chat_mode(bool(template), forced, lambda text: _is_one_token(llama, text))
        self._formatter = None
        if self.mode.kind == BUILTIN_TEMPLATE:
            if _apply_builtin(self.mode.template, _PROBE) is None:
                raise ValueError(f"llama.cpp has no built-in chat template named {self.mode.template!r}")
        elif self.mode.kind != COMPLETION:
            from llama_cpp.llama_chat_format import (  # deferred: importing llama_cpp loads the llama.cpp libraries
                Jinja2ChatFormatter,  # deferred: importing llama_cpp loads the llama.cpp libraries
            )

            eos_id, bos_id = llama.token_eos(), llama.token_bos()
            eos = llama._model.token_get_text(eos_id) if eos_id != -1 else ""
            bos = llama._model.token_get_text(bos_id) if bos_id != -1 else ""
            self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos,
                                                  add_generation_prompt=True)
        # The turn markers this template writes: generating one means the model's turn is over.
        probe = "" if self.mode.kind == COMPLETION else self.render(_PROBE)
        self.markers = tuple(marker for marker in TURN_MARKERS if marker in probe)
        self.marker_ids = frozenset(
            llama.tokenize(marker.encode("utf-8"), add_bos=False, special=True)[0]
            for marker in self.markers if _is_one_token(llama, marker))

    @property
    def is_completion(self) -> bool:
        return self.mode.kind == COMPLETION

    def render(self, messages: Sequence[ChatMessage]) -> str:
        if self.mode.kind == COMPLETION:
            return "".join(message.content for message in messages if message.role != "system")
        if self.mode.kind == BUILTIN_TEMPLATE:
            return _apply_builtin(self.mode.template, messages) or ""
        as_dicts = [{"role": message.role, "content": message.content} for message in messages]
        return self._formatter(messages=as_dicts).prompt

    def tokenize(self, messages: Sequence[ChatMessage]) -> list[int]:
        own_template = self._formatter is not None
        return self._llama.tokenize(self.render(messages).encode("utf-8"), add_bos=not own_template, special=True)


def _is_one_token(llama: Any, text: str) -> bool:
    """True when the vocabulary holds `text` as one (special) token."""
    try:
        tokens = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    except (RuntimeError, ValueError):
        return False
    return len(tokens) == 1 and llama.detokenize(tokens, special=True) == text.encode("utf-8")


def _apply_builtin(name: str, messages: Sequence[ChatMessage]) -> str | None:
    """llama.cpp's built-in template `name` applied to `messages`; None when llama.cpp has no such template."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    keep = [(m.role.encode("utf-8"), m.content.encode("utf-8")) for m in messages]
    chat = (llama_cpp.llama_chat_message * len(keep))()
    for index, (role, content) in enumerate(keep):
        chat[index].role, chat[index].content = role, content
    size = 2 * sum(len(role) + len(content) for role, content in keep) + 256
    for _ in range(2):
        buffer = ctypes.create_string_buffer(size)
        needed = llama_cpp.llama_chat_apply_template(name.encode("utf-8"), chat, len(keep), True, buffer, size)
        if needed < 0:
            return None
        if needed <= size:
            return buffer.raw[:needed].decode("utf-8", errors="replace")
        size = needed + 1
    return None
