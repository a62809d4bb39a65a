"""The model's own chat template (GGUF `tokenizer.chat_template`), rendered and tokenized."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.core.engine.events import ChatMessage

# Used only when the GGUF carries no template; Loaded.warnings says so.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ChatTemplate:
    """Renders messages exactly as llama-cpp-python's GGUF chat handler does, then tokenizes.

    Tokenizing mirrors `chat_formatter_to_chat_completion_handler`: special tokens are parsed
    and no BOS is prepended (the template writes it when the model wants one).
    """

    def __init__(self, llama: Any) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._llama = llama
        template = llama.metadata.get("tokenizer.chat_template")
        self.is_fallback = not template
        eos_id, bos_id = llama.token_eos(), llama.token_bos()
        eos = llama._model.token_get_text(eos_id) if eos_id != -1 else ""
        bos = llama._model.token_get_text(bos_id) if bos_id != -1 else ""
        self._formatter = Jinja2ChatFormatter(
            template=template or CHATML_TEMPLATE, eos_token=eos, bos_token=bos, add_generation_prompt=True
        )

    def render(self, messages: Sequence[ChatMessage]) -> str:
        as_dicts = [{"role": message.role, "content": message.content} for message in messages]
        return self._formatter(messages=as_dicts).prompt

    def tokenize(self, messages: Sequence[ChatMessage]) -> list[int]:
        return self._llama.tokenize(self.render(messages).encode("utf-8"), add_bos=False, special=True)
