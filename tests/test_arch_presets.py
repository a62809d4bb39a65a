"""Preset keys for other architectures: swa_full and chat_template, checked, saved and mapped to llama-server flags."""

from __future__ import annotations

import tomllib

import pytest

from workbench.core.errors import PresetError
from workbench.core.config.preset import Preset
from workbench.core.config.presets import llama_server_args, preset_from_mapping, preset_to_toml


def test_swa_full_defaults_off_like_llama_server_and_maps_to_its_flag():
    preset = preset_from_mapping({"name": "g"})
    assert preset.swa_full is False
    assert "--swa-full" not in llama_server_args(preset, "m.gguf")  # llama-server's default: the window
    full = preset_from_mapping({"name": "g", "swa_full": True})
    assert "--swa-full" in llama_server_args(full, "m.gguf")
    with pytest.raises(PresetError, match="swa_full"):
        preset_from_mapping({"name": "g", "swa_full": "yes"})


def test_chat_template_is_a_llama_cpp_builtin_name_or_completion():
    assert preset_from_mapping({"name": "c"}).chat_template == ""
    gemma = preset_from_mapping({"name": "c", "chat_template": "gemma"})
    args = llama_server_args(gemma, "m.gguf")
    assert args[args.index("--chat-template") + 1] == "gemma"
    completion = preset_from_mapping({"name": "c", "chat_template": "completion"})
    assert "--chat-template" not in llama_server_args(completion, "m.gguf")  # llama-server: /completion
    with pytest.raises(PresetError, match='Did you mean chatml') as error:
        preset_from_mapping({"name": "c", "chat_template": "chatm"})
    assert "completion" in str(error.value)


def test_both_keys_survive_a_save_and_load():
    preset = Preset("round", swa_full=True, chat_template="llama3")
    again = preset_from_mapping(tomllib.loads(preset_to_toml(preset)))
    assert (again.swa_full, again.chat_template) == (True, "llama3")
