"""Re-quantizing with llama.cpp's quantizer: core function, cache, CLI, and presets that need it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from real_engine import ROOMY
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import Loaded, LoadProgressed
from workbench.core.errors import WorkbenchError
from workbench.core.gguf.reader import read_gguf
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset
from workbench.core.engine.quantize import cached_quantized_path, quantize, quantized_cache_dir



@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_quantize_to_q8_0_warns_reports_progress_and_caches_by_source_and_type(cache_dir):
    progress, warnings = [], []
    path = quantize(bundled_model_path(), "q8_0", on_progress=progress.append, on_warning=warnings.append)
    assert path == cached_quantized_path(bundled_model_path(), "Q8_0")
    assert path.parent == quantized_cache_dir() and str(path).startswith(str(cache_dir))
    result = read_gguf(path)
    assert result.file_type == "Q8_0"
    assert result.n_params == read_gguf(bundled_model_path()).n_params
    assert progress == sorted(progress) and progress[-1] == 1.0 and len(progress) > 5
    assert warnings == [warnings[0]] and "quality is bounded by the source's Q4_1" in warnings[0]
    # the second time the cache answers: no quantizer run, the same file
    stamp = path.stat().st_mtime_ns
    again = []
    assert quantize(bundled_model_path(), "Q8_0", on_progress=again.append) == path
    assert again == [1.0] and path.stat().st_mtime_ns == stamp
    assert [p.name for p in quantized_cache_dir().iterdir()] == [path.name]  # no partial files left


def test_an_unknown_type_is_refused_with_the_list_of_valid_ones():
    with pytest.raises(WorkbenchError) as raised:
        quantize(bundled_model_path(), "Q9_X")
    message = str(raised.value)
    assert "unknown weight type 'Q9_X'" in message and "Q4_K_M" in message and "F16" in message


def test_a_type_that_needs_an_importance_matrix_fails_with_llama_cpp_s_reason_and_leaves_nothing(cache_dir):
    with pytest.raises(WorkbenchError) as raised:
        quantize(bundled_model_path(), "IQ2_XXS")
    assert "importance matrix" in str(raised.value) and "\n" not in str(raised.value)
    assert list(quantized_cache_dir().iterdir()) == []


def test_cli_makes_a_full_precision_copy_of_the_bundled_model(tmp_path, cli):
    out = tmp_path / "smollm2-f16.gguf"
    done = cli("quantize", "bundled", "--to", "F16", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(out)) and "(F16," in done.stdout
    assert "quantizing: 100%" in done.stderr and "bounded by the source's Q4_1" in done.stderr
    model = read_gguf(out)
    assert model.file_type == "F16"
    assert model.type_mix[0][0] == "F16"


def test_cli_refuses_an_unknown_type_in_one_line():
    # the one run of `python -m workbench quantize` in a process of its own: what the user types
    done = subprocess.run([sys.executable, "-m", "workbench", "quantize", "bundled", "--to", "Q9"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unknown weight type 'Q9'" in done.stderr


def test_cli_output_into_an_existing_folder_gets_the_default_name(tmp_path, cli):
    done = cli("quantize", "bundled", "--to", "Q8_0", "-o", str(tmp_path))
    assert done.returncode == 0, done.stderr
    expected = tmp_path / "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert done.stdout.startswith(f"{expected}  (Q8_0,")
    assert read_gguf(expected).file_type == "Q8_0"
    assert [p.name for p in tmp_path.iterdir()] == ["SmolLM2-135M-Instruct.Q8_0.gguf"]  # no partial file left


@pytest.mark.parametrize(
    ("out", "said"),
    [("missing/model.gguf", "the output folder does not exist"),
     ("/proc", "cannot write in the output folder")],  # /proc refuses new files even to root
)
def test_cli_output_that_cannot_be_written_is_one_line_before_any_work(tmp_path, out, said, cli):
    target = str(tmp_path / out)
    done = cli("quantize", "bundled", "--to", "Q8_0", "-o", target)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and said in done.stderr and "Traceback" not in done.stderr
    assert "quantizing" not in done.stderr and not (tmp_path / "missing").exists()


def test_a_preset_asking_for_other_weights_loads_a_requantized_copy_made_first(cache_dir):
    preset = Preset(name="test-q8", weights="Q8_0", ctx_size=256, batch_size=128, ubatch_size=128, threads=1)
    with EngineClient() as client:
        events = list(client.load(bundled_model_path(), preset, device=ROOMY))
        loaded = events[-1]
        assert isinstance(loaded, Loaded), loaded
        quantizing = [e.fraction for e in events if isinstance(e, LoadProgressed) and e.stage == "quantizing"]
        assert quantizing[0] == 0.0 and quantizing[-1] == 1.0
        stages = [e.stage for e in events if isinstance(e, LoadProgressed)]
        assert stages.index("quantizing") < stages.index("loading")
        assert loaded.weights_type == "Q8_0"
        assert loaded.loaded_path == str(cached_quantized_path(bundled_model_path(), "Q8_0"))
        assert loaded.model_path == str(bundled_model_path())
        assert loaded.model_buffer_bytes > read_gguf(bundled_model_path()).weights_bytes * 1.3
        # loading it again takes the cached file
        again = list(client.load(bundled_model_path(), preset, device=ROOMY))
        notes = [e.message for e in again if isinstance(e, LoadProgressed) and e.stage == "quantizing"]
        assert notes and notes[0].startswith("using cached")
        assert isinstance(again[-1], Loaded)


def test_a_cache_folder_that_cannot_be_created_is_one_line_naming_the_setting(monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", "/proc/workbench-cache")  # /proc refuses new folders even to root
    with pytest.raises(WorkbenchError) as raised:
        quantize(bundled_model_path(), "Q8_0")
    message = str(raised.value)
    assert "cannot create the cache folder" in message and "WORKBENCH_CACHE_DIR" in message and "\n" not in message


def test_a_script_without_a_main_guard_can_quantize_at_module_level(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from workbench.core.paths import bundled_model_path\n"
        "from workbench.core.engine.quantize import quantize\n"
        f"print(quantize(bundled_model_path(), 'Q8_0', {str(tmp_path / 'out.gguf')!r}).name)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "out.gguf" and read_gguf(tmp_path / "out.gguf").file_type == "Q8_0"
