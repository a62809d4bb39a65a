"""How a model is prompted: its own chat template, llama.cpp's built-in one for its family, or completion mode."""

from __future__ import annotations

from dataclasses import dataclass

MODEL_TEMPLATE = "model"  # the GGUF's tokenizer.chat_template
BUILTIN_TEMPLATE = "builtin"  # llama.cpp's built-in template for the family whose turn tokens the vocabulary has
COMPLETION = "completion"  # no template: the text continues what the user types

# Families llama.cpp has a built-in template for (src/llama-chat.cpp, LLM_CHAT_TEMPLATES), by
# the turn tokens their vocabularies carry; the first family whose tokens are all present wins
# (Llama 3 vocabularies may also carry <|im_start|>-like extras, so specific families go first).
FAMILY_TURN_TOKENS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gemma", ("<start_of_turn>", "<end_of_turn>")),
    ("llama3", ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")),
    ("granite", ("<|start_of_role|>", "<|end_of_role|>")),
    ("phi3", ("<|user|>", "<|assistant|>", "<|end|>")),
    ("chatml", ("<|im_start|>", "<|im_end|>")),
)

# Strings that open or close a turn in some template: a model that writes one has finished its turn.
TURN_MARKERS = (
    "<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|start_header_id|>", "<|eot_id|>",
    "<|user|>", "<|assistant|>", "<|system|>", "<|end|>", "<|start_of_role|>", "<|end_of_text|>",
    "<|endoftext|>", "[INST]", "[/INST]",
)

# llama.cpp's built-in template names (LLM_CHAT_TEMPLATES, llama.cpp 0c1e570), for checking a preset
# before any engine runs; the engine asks llama.cpp itself at load.
BUILTIN_TEMPLATE_NAMES = (
    "chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1", "mistral-v3",
    "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "phi4", "falcon3", "zephyr", "monarch",
    "gemma", "orion", "openchat", "vicuna", "vicuna-orca", "deepseek", "deepseek2", "deepseek3", "command-r",
    "llama3", "chatglm3", "chatglm4", "glmedge", "minicpm", "exaone3", "exaone4", "rwkv-world", "granite",
    "gigachat", "megrez", "yandex", "bailing", "llama4", "smolvlm", "hunyuan-moe", "gpt-oss", "kimi-k2",
    "deepseek-ocr", "exaone-moe", "granite-4.0", "granite-4.1", "bailing-think", "bailing2", "hunyuan-dense",
    "hunyuan-vl", "seed_oss", "grok-2", "pangu-embedded", "solar-open",
)
FORCE_HINT = 'to force a template, set chat_template = "chatml" (or gemma, llama3, phi3, ...) in the preset'


@dataclass(frozen=True)
class ChatMode:
    """Which path the chat takes, and the one message that says so (app, CLI and engine alike)."""

    kind: str  # MODEL_TEMPLATE, BUILTIN_TEMPLATE or COMPLETION
    template: str = ""  # the built-in template's name for BUILTIN_TEMPLATE (or a forced one)
    reason: str = ""  # why, when it is not the model's own template

    @property
    def notice(self) -> str:
        if self.kind == MODEL_TEMPLATE:
            return ""
        if self.kind == BUILTIN_TEMPLATE:
            return f"chat template: llama.cpp's built-in {self.template!r} template ({self.reason})"
        return (f"completion mode: {self.reason}, so the model continues the text you type "
                f"instead of answering turns; {FORCE_HINT}")


def choose_chat_mode(has_template: bool, forced: str, has_token) -> ChatMode:
    """The chat path for a model: `forced` (a preset's chat_template), else its own template,
    else the family whose turn tokens `has_token(text)` finds, else completion mode."""
    if forced == COMPLETION:
        return ChatMode(COMPLETION, reason='the preset sets chat_template = "completion"')
    if forced:
        return ChatMode(BUILTIN_TEMPLATE, forced, 'the preset sets chat_template')
    if has_template:
        return ChatMode(MODEL_TEMPLATE)
    for family, tokens in FAMILY_TURN_TOKENS:
        if all(has_token(token) for token in tokens):
            return ChatMode(BUILTIN_TEMPLATE, family,
                            f"the model has no chat template; its vocabulary has {family}'s turn tokens")
    return ChatMode(COMPLETION, reason="the model has no chat template and no known turn tokens (a base model)")
