"""How the engine turns a conversation into prompt tokens: the model's template, llama.cpp's built-in one, or plain text."""

from __future__ import annotations

import contextlib
import ctypes
import re
import secrets
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import jinja2

from workbench.core.config.chat_mode import BUILTIN_TEMPLATE, COMPLETION, TURN_MARKERS, ChatMode, choose_chat_mode
from workbench.core.engine.events import ChatMessage
from workbench.core.engine.template_sandbox import BoundedEnvironment, TemplateRefused

_PROBE = (ChatMessage("system", "s"), ChatMessage("user", "u"), ChatMessage("assistant", "a"), ChatMessage("user", "v"))
REFUSED_HINT = ('set chat_template = "chatml" (or another llama.cpp built-in) or chat_template = "completion" '
                'in the preset')


class ChatTemplateRefused(ValueError):
    """The model's chat template failed or went over its budget; `message` is the one line to show."""

    def __init__(self, model_name: str, reason: str) -> None:
        self.message = f"chat template of {model_name} refused: {reason}; {REFUSED_HINT}"
        super().__init__(self.message)


class ChatTemplate:
    """Renders messages as the chosen ChatMode says, then tokenizes.

    The model's own (Jinja) template renders as llama-cpp-python's GGUF chat handler does
    (same sandbox options and variables; no BOS is prepended, the template writes it), but
    under the step, size and time budget of template_sandbox: a template that loops or
    builds a bomb is refused (ChatTemplateRefused) instead of hanging the engine. A
    built-in template is rendered by llama.cpp (llama_chat_apply_template) and, like
    completion mode, tokenized with the model's own BOS rule. In completion mode the prompt
    is the conversation's text run together: the model continues it.
    """

    def __init__(self, llama: Any, forced: str = "", model_name: str = "the model",
                 special_in_messages: bool = False) -> None:
        template = llama.metadata.get("tokenizer.chat_template")
        self._llama = llama
        self._special_in_messages = special_in_messages  # True: message text may write control tokens
        self._specials_seen: dict[str, frozenset[str]] = {}
        self.mode: ChatMode = choose_chat_mode(bool(template), forced, lambda text: _is_one_token(llama, text))
        self._formatter = None
        if self.mode.kind == BUILTIN_TEMPLATE:
            if _apply_builtin(self.mode.template, _PROBE) is None:
                raise ValueError(f"llama.cpp has no built-in chat template named {self.mode.template!r}")
        elif self.mode.kind != COMPLETION:
            eos_id, bos_id = llama.token_eos(), llama.token_bos()
            eos = llama._model.token_get_text(eos_id) if eos_id != -1 else ""
            bos = llama._model.token_get_text(bos_id) if bos_id != -1 else ""
            self._formatter = _BoundedFormatter(template, eos, bos, model_name)
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
        return self._formatter.render(messages)

    def tokenize(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The prompt's tokens: only the template's own text may hold control tokens.

        Message text that spells a special token (`<|im_start|>system`) is cut out before
        rendering, held as a placeholder, and tokenized as plain text after, so a message
        cannot open a turn of its own; `special_in_messages` keeps llama-cpp-python's way
        (the whole rendered prompt parsed for special tokens).
        """
        add_bos = self._formatter is None  # the model's own template writes its BOS itself
        held: list[str] = []
        nonce = secrets.token_hex(4)
        if not self._special_in_messages:
            messages = [ChatMessage(m.role, self._hold_specials(m.content, held, nonce)) for m in messages]
        rendered = self.render(messages)
        if not held:
            return self._llama.tokenize(rendered.encode("utf-8"), add_bos=add_bos, special=True)
        tokens: list[int] = []
        for index, part in enumerate(re.split(f"\ue000{nonce}:(\\d+)\ue001", rendered)):
            if index % 2:
                tokens += self._llama.tokenize(held[int(part)].encode("utf-8"), add_bos=False, special=False)
            elif part or index == 0:
                tokens += self._llama.tokenize(part.encode("utf-8"), add_bos=add_bos and index == 0, special=True)
        return tokens

    def _hold_specials(self, text: str, held: list[str], nonce: str) -> str:
        """`text` with every special token it spells replaced by a placeholder whose text goes into `held`."""
        specials = self._specials_seen.get(text)
        if specials is None:
            specials = _special_texts(self._llama, text)
            if len(self._specials_seen) >= 512:  # a conversation re-renders the same messages turn after turn
                self._specials_seen.clear()
            self._specials_seen[text] = specials
        if not specials:
            return text
        pattern = "|".join(re.escape(special) for special in sorted(specials, key=len, reverse=True))

        def hold(match: re.Match[str]) -> str:
            held.append(match.group(0))
            return f"\ue000{nonce}:{len(held) - 1}\ue001"

        return re.sub(pattern, hold, text)


@contextlib.contextmanager
def templates_left_uncompiled() -> Iterator[None]:
    """While a Llama is made: llama-cpp-python compiles every chat template in the metadata for
    chat handlers this engine never uses, and Jinja's compiler folds constants, so a template
    holding `{{ 'x' * 10**9 }}` would build its bomb inside the constructor, outside any budget."""
    from llama_cpp import llama_chat_format  # deferred: importing llama_cpp loads the llama.cpp libraries

    original = llama_chat_format.Jinja2ChatFormatter
    llama_chat_format.Jinja2ChatFormatter = _UnusedFormatter
    try:
        yield
    finally:
        llama_chat_format.Jinja2ChatFormatter = original


class _UnusedFormatter:
    """Stands in for llama-cpp-python's formatter: keeps nothing, compiles nothing."""

    def __init__(self, **_kwargs: Any) -> None:
        pass

    def to_chat_handler(self) -> Any:
        def refuse(**_kwargs: Any) -> Any:
            raise RuntimeError("the engine renders chat templates itself (ChatTemplate)")

        return refuse


class _BoundedFormatter:
    """The model's Jinja template, rendered as llama-cpp-python's Jinja2ChatFormatter does, under a budget."""

    def __init__(self, template: str, eos: str, bos: str, model_name: str) -> None:
        self._environment = BoundedEnvironment()
        self._eos, self._bos, self._model_name = eos, bos, model_name
        try:
            self._template = self._environment.from_string(template)
        except (jinja2.TemplateError, TemplateRefused, RecursionError, MemoryError) as error:
            raise ChatTemplateRefused(model_name, f"it does not compile: {_why(error)}") from None

    def render(self, messages: Sequence[ChatMessage]) -> str:
        as_dicts = [{"role": message.role, "content": message.content} for message in messages]
        self._environment.start(sum(len(message.content) for message in messages))
        try:
            return self._template.render(
                messages=as_dicts, eos_token=self._eos, bos_token=self._bos, raise_exception=_raise_exception,
                add_generation_prompt=True, functions=None, function_call=None, tools=None, tool_choice=None,
                strftime_now=_strftime_now)
        except TemplateRefused as refused:
            raise ChatTemplateRefused(self._model_name, refused.reason) from None
        except RecursionError:
            raise ChatTemplateRefused(self._model_name, "it recursed too deep") from None
        except MemoryError:
            raise ChatTemplateRefused(self._model_name, "it ran out of memory") from None
        except Exception as error:  # noqa: BLE001 - a stranger's code raises anything; one line names it
            raise ChatTemplateRefused(self._model_name, f"it failed: {_why(error)}") from None


def _why(error: BaseException) -> str:
    text = " ".join(str(error).split())[:200]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _raise_exception(message: str) -> None:
    raise ValueError(message)


def _strftime_now(pattern: str) -> str:
    return datetime.now().strftime(pattern[:100])


def _special_texts(llama: Any, text: str) -> frozenset[str]:
    """The special tokens (control or user-defined) that `text` spells, as llama.cpp parses them."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    encoded = text.encode("utf-8")
    parsed = llama.tokenize(encoded, add_bos=False, special=True)
    if parsed == llama.tokenize(encoded, add_bos=False, special=False):
        return frozenset()
    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    special = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
    return frozenset(llama.detokenize([token], special=True).decode("utf-8", errors="replace")
                     for token in parsed if llama_cpp.llama_vocab_get_attr(vocab, token) & special)


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
