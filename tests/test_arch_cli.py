"""The CLI on other architectures: `inspect` shows experts and sliding windows, `chat` says which chat path a model without template takes."""

from __future__ import annotations

import json
from pathlib import Path

from arch_models import arch_model, write_arch_gguf
from workbench.cli.main import main


def test_inspect_shows_experts_and_the_sliding_window(tmp_path: Path, capsys):
    moe = write_arch_gguf(tmp_path / "moe.gguf", arch_model("qwen2moe"))
    assert main(["inspect", str(moe)]) == 0
    text = capsys.readouterr().out
    assert "experts          8 per layer, 2 used per token, 1 shared" in text
    gemma = write_arch_gguf(tmp_path / "gemma.gguf", arch_model("gemma2"))
    assert main(["inspect", str(gemma), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # gemma2: every other layer of 6 slides over the 512-token window the file gives
    assert data["sliding_window"]["n_swa"] == 512 and data["sliding_window"]["swa_layers"] == 3
    assert data["experts"] is None


def test_chat_on_a_base_model_says_completion_mode_once(tmp_path: Path, cli):
    model = write_arch_gguf(tmp_path / "base.gguf", arch_model("llama", turn_tokens=""))
    preset = tmp_path / "tiny.toml"
    preset.write_text('name = "tiny"\nctx_size = 512\nbatch_size = 256\nubatch_size = 256\nthreads = 1\n')
    done = cli("chat", str(model), "--preset", str(preset), "--device", "host", "--temp", "0", "--max-tokens", "4",
               stdin="abc\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("completion mode: the model has no chat template and no known turn tokens") == 1
    assert 'chat_template = "chatml"' in done.stderr  # how to force a template


def test_ledger_names_an_unverified_llama_cpp_build(monkeypatch, capsys):
    import workbench.core.ledger.llama_build as llama_build

    assert main(["ledger", "bundled", "--preset", "as-is", "--device", "jetson-orin-nano-8gb"]) == 0
    verified = capsys.readouterr().out
    assert "graph peak + logits; llama.cpp 0c1e570" in verified and "UNVERIFIED" not in verified
    monkeypatch.setattr(llama_build, "installed_version", lambda: "0.4.0")
    assert main(["ledger", "bundled", "--preset", "as-is", "--device", "jetson-orin-nano-8gb"]) == 0
    unverified = capsys.readouterr().out
    assert "graph peak + logits; UNVERIFIED build" in unverified
    assert "warning: unverified: installed llama-cpp-python 0.4.0 is outside the verified 0.3.36" in unverified
