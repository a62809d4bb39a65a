"""Presets: shipped files, loading errors with file:line and a fix, user presets, llama-server flags, checks."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import tomllib
from pathlib import Path

import psutil
import pytest

from workbench.cli.main import main
from workbench.core.gguf import ggml_types
from workbench.core.config.devices import load_device
from workbench.core.errors import PresetError
from workbench.core.gguf.reader import read_gguf
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.paths import bundled_model_path, data_dir
from workbench.core.config.preset import Preset
from workbench.core.config.presets import (
    PRESET_KEYS,
    Problem,
    list_presets,
    llama_server_args,
    llama_server_command,
    load_preset,
    preset_catalog,
    preset_from_mapping,
    preset_origin,
    preset_problems,
    preset_to_toml,
    resolve_threads,
    save_user_preset,
    user_presets_dir,
)

SHIPPED = ("as-is", "balanced-q4km", "edge-int4-kv8", "long-context-kv4", "quality-q8")


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    """Every test gets its own empty user config folder."""
    folder = tmp_path / "config"
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(folder))
    return folder


def write(tmp_path: Path, text: str, name: str = "broken.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def strip_source(preset: Preset) -> Preset:
    return dataclasses.replace(preset, source="")


# --- shipped presets -----------------------------------------------------------------

def test_every_shipped_file_loads_by_name_and_by_path():
    files = sorted(data_dir("presets").glob("*.toml"))
    assert sorted(path.stem for path in files) == sorted(SHIPPED)
    for path in files:
        by_name = load_preset(path.stem)
        assert by_name.name == path.stem
        assert by_name.description
        assert preset_origin(by_name) == "shipped"
        assert strip_source(load_preset(str(path))) == strip_source(by_name)


def test_shipped_presets_hold_what_the_issue_asks_for():
    presets = {p.name: p for p in list_presets()}
    assert tuple(sorted(presets)) == SHIPPED
    edge = presets["edge-int4-kv8"]
    assert (edge.weights, edge.cache_type_k, edge.cache_type_v, edge.flash_attn, edge.ctx_size) == (
        "Q4_K_M", "q8_0", "q8_0", True, 4096)
    balanced = presets["balanced-q4km"]
    assert (balanced.weights, balanced.cache_type_k, balanced.cache_type_v, balanced.ctx_size) == (
        "Q4_K_M", "f16", "f16", 2048)
    quality = presets["quality-q8"]
    assert (quality.weights, quality.cache_type_k, quality.ctx_size) == ("Q8_0", "f16", 2048)
    long_context = presets["long-context-kv4"]
    assert (long_context.weights, long_context.cache_type_k, long_context.cache_type_v,
            long_context.flash_attn, long_context.ctx_size) == ("Q4_K_M", "q4_0", "q4_0", True, 8192)
    assert presets["as-is"].weights == "keep"


def test_every_shipped_file_uses_only_the_flat_format():
    for path in data_dir("presets").glob("*.toml"):
        data = tomllib.loads(path.read_text())
        assert all(not isinstance(value, dict) for value in data.values()), path


# --- loading errors: file, line, fix -------------------------------------------------

ERROR_CASES = [
    # (file text, line of the error, words in what is wrong, words in the fix)
    ('name = "x"\nctx_sise = 4096\n', 2, 'unknown key "ctx_sise"', 'Did you mean "ctx_size"'),
    ('name = "x"\nweights = "Q4_K_M"\nctx_size = "4k"\n', 3, 'ctx_size = "4k" is a text value', "ctx_size = 4096"),
    ('name = "x"\nctx_size = 4096.0\n', 2, "is a decimal number, expected a whole number", "ctx_size = 4096"),
    ('name = "x"\nbatch_size = true\n', 2, "is a true/false value", "batch_size = 512"),
    ('name = "x"\nctx_size = 8\n', 2, "ctx_size = 8 is below the minimum of 16", "from 16"),
    ('name = "x"\nbatch_size = 256\nubatch_size = 512\n', 3, "ubatch_size = 512 is larger than batch_size = 256",
     "ubatch_size <= 256"),
    ('name = "x"\nthreads = -1\n', 2, "threads = -1 is below the minimum of 0", "threads = 0"),
    ('name = "x"\ndraft_prompt_lookup = -2\n', 2, "draft_prompt_lookup = -2", "draft_prompt_lookup = 10"),
    ('name = "x"\nweights = "Q4_K_X"\n', 2, "not a weight type llama.cpp can quantize to", "Q4_K_M"),
    ('name = "x"\ncache_type_k = "q9_0"\n', 2, "not a KV-cache type llama.cpp accepts", "q8_0, q4_0"),
    ('name = "x"\ncache_type_v = "q8_0"\nflash_attn = false\n', 3, "cache_type_v = q8_0 needs flash_attn = true",
     "set flash_attn = true"),
    ('name = "x"\ncache_type_v = "q4_0"\n', 2, "cache_type_v = q4_0 needs flash_attn = true", "flash_attn = true"),
    ('name = "x"\nflash_attn = "yes"\n', 2, 'flash_attn = "yes" is a text value, expected true or false',
     "flash_attn = true"),
    ('name = "x"\nweights = Q4_K_M\n', 2, "not valid TOML", "text values need quotes"),
    ('name = "x"\nctx_size = 4096\nctx_size = 2048\n', 3, "not valid TOML", "Fix the syntax"),
]


def assert_clear_error(load, path: Path, line: int, what: str, fix: str) -> None:
    """`load(path)` fails with one line that starts with path:line, says `what` and gives `fix`."""
    with pytest.raises(PresetError) as caught:
        load(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}"), message
    assert what in message
    assert fix.lower() in caught.value.fix.lower()
    assert "\n" not in message


@pytest.mark.parametrize(("text", "line", "what", "fix"), ERROR_CASES)
def test_a_broken_preset_names_file_line_and_fix(tmp_path, text, line, what, fix):
    assert_clear_error(load_preset, write(tmp_path, text), line, what, fix)


def test_unknown_weight_type_lists_every_valid_one(tmp_path):
    path = write(tmp_path, 'weights = "Q3_K_XL"\n')
    with pytest.raises(PresetError) as caught:
        load_preset(str(path))
    for name in ggml_types.QUANT_TYPES:
        assert name in caught.value.fix
    assert "keep" in caught.value.fix


def test_syntax_error_carries_the_column(tmp_path):
    path = write(tmp_path, 'name = "x"\nweights = Q4_K_M\n')
    with pytest.raises(PresetError) as caught:
        load_preset(str(path))
    assert caught.value.where == f"{path}:2:11"


def test_unknown_name_suggests_the_closest(monkeypatch):
    with pytest.raises(PresetError) as caught:
        load_preset("edge-int8-kv8")
    assert 'Did you mean "edge-int4-kv8"' in caught.value.fix
    assert all(name in caught.value.fix for name in SHIPPED)


def test_missing_preset_file_is_one_line(tmp_path):
    with pytest.raises(PresetError) as caught:
        load_preset(str(tmp_path / "nowhere.toml"))
    assert str(tmp_path / "nowhere.toml") in str(caught.value)
    assert "no preset file" in str(caught.value)


def test_a_folder_given_as_preset_or_device_says_so(tmp_path):
    # was: "cannot read the preset file (Is a directory). Check the file's permissions"
    for load, kind in ((load_preset, "preset"), (load_device, "device")):
        with pytest.raises(PresetError) as caught:
            load(str(tmp_path))
        assert str(caught.value) == (f"{tmp_path}: is a folder, not a {kind} file. "
                                     f"Give the path of a .toml file inside it, or a {kind} name")


def test_name_defaults_to_the_file_name_for_a_file_given_by_path(tmp_path):
    path = write(tmp_path, "ctx_size = 1024\n", name="my-board-test.toml")
    preset = load_preset(str(path))
    assert (preset.name, preset.ctx_size, preset.source) == ("my-board-test", 1024, str(path))
    assert preset_origin(preset) == "file"


def test_weights_and_cache_types_are_case_insensitive_and_normalised(tmp_path):
    path = write(tmp_path, 'weights = "q4_k_m"\ncache_type_k = "Q8_0"\n')
    preset = load_preset(str(path))
    assert (preset.weights, preset.cache_type_k) == ("Q4_K_M", "q8_0")


def test_preset_from_mapping_checks_like_a_file():
    preset = preset_from_mapping({"name": "m", "weights": "Q8_0", "ctx_size": 1024})
    assert (preset.name, preset.weights, preset.ctx_size, preset.source) == ("m", "Q8_0", 1024, "")
    with pytest.raises(PresetError) as caught:
        preset_from_mapping({"name": "m", "ctx_size": "4k"}, source="ui form")
    assert str(caught.value).startswith("ui form: ctx_size")
    with pytest.raises(PresetError, match="needs flash_attn = true"):
        preset_from_mapping({"name": "m", "cache_type_v": "q8_0"})
    with pytest.raises(PresetError, match="missing name"):
        preset_from_mapping({"ctx_size": 1024})


def test_preset_from_mapping_finds_lines_when_the_source_is_a_file(tmp_path):
    path = write(tmp_path, 'name = "x"\n\nthreads = -4\n')
    with pytest.raises(PresetError) as caught:
        preset_from_mapping(tomllib.loads(path.read_text()), source=str(path))
    assert caught.value.where == f"{path}:3"


# --- user presets ---------------------------------------------------------------------

def test_save_then_list_and_load_a_user_preset(config_dir):
    mine = Preset(name="my-jetson", description="tuned", weights="Q5_K_M", ctx_size=3072, threads=4,
                  cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True, draft_prompt_lookup=8)
    path = save_user_preset(mine)
    assert path == config_dir / "presets" / "my-jetson.toml"
    assert path.parent == user_presets_dir()
    loaded = load_preset("my-jetson")
    assert strip_source(loaded) == mine
    assert preset_origin(loaded) == "user"
    listed = {p.name: preset_origin(p) for p in list_presets()}
    assert listed == {**{name: "shipped" for name in SHIPPED}, "my-jetson": "user"}


def test_a_user_preset_overrides_a_shipped_one_by_name():
    shipped = load_preset("balanced-q4km")
    save_user_preset(dataclasses.replace(shipped, ctx_size=1024, source=""))
    overridden = load_preset("balanced-q4km")
    assert overridden.ctx_size == 1024
    assert preset_origin(overridden) == "user"
    matching = [p for p in list_presets() if p.name == "balanced-q4km"]
    assert len(matching) == 1 and matching[0].ctx_size == 1024


def test_saving_twice_replaces_the_file():
    save_user_preset(Preset(name="again", ctx_size=1024))
    save_user_preset(Preset(name="again", ctx_size=4096))
    assert load_preset("again").ctx_size == 4096
    assert [p.name for p in list_presets()].count("again") == 1


def test_an_impossible_preset_is_not_saved(config_dir):
    with pytest.raises(PresetError, match="needs flash_attn = true"):
        save_user_preset(Preset(name="bad", cache_type_v="q8_0", flash_attn=False))
    with pytest.raises(PresetError, match="cannot be a file name"):
        save_user_preset(Preset(name="../escape"))
    assert not (config_dir / "presets" / "bad.toml").exists()
    assert not (config_dir / "escape.toml").exists()


def test_a_user_file_whose_name_differs_from_its_file_name_is_refused(config_dir):
    folder = config_dir / "presets"
    folder.mkdir(parents=True)
    (folder / "fast.toml").write_text('name = "quick"\n')
    with pytest.raises(PresetError) as caught:
        load_preset("fast")
    assert caught.value.where == f"{folder / 'fast.toml'}:1"
    assert "rename the file to quick.toml" in caught.value.fix


def test_every_preset_field_is_a_checked_file_key():
    # A field added to Preset without a check here would be dropped by save and refused by load.
    assert set(PRESET_KEYS) == {field.name for field in dataclasses.fields(Preset)} - {"source"}


def test_preset_to_toml_round_trips():
    for preset in list_presets():
        again = preset_from_mapping(tomllib.loads(preset_to_toml(preset)))
        assert again == strip_source(preset)


# --- llama-server command -------------------------------------------------------------

def test_llama_server_command_for_edge_int4_kv8():
    preset = load_preset("edge-int4-kv8")
    command = llama_server_command(preset, "/models/my model.gguf")
    argv = shlex.split(command)
    assert argv[:3] == ["llama-server", "-m", "/models/my model.gguf"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags == {"-c": "4096", "-b": "512", "-ub": "512", "-t": str(resolve_threads(preset)),
                     "-ctk": "q8_0", "-ctv": "q8_0", "-fa": "on", "--load-mode": "mmap", "-np": "1"}
    assert tuple(argv) == llama_server_args(preset, "/models/my model.gguf")


def test_parallel_key_is_bounded_and_carried_to_llama_server():
    """`parallel` is llama-server's -np: 1 by default, 1 to 256 (llama.cpp's LLAMA_MAX_SEQ), saved and loaded again."""
    four = preset_from_mapping({"name": "four", "parallel": 4})
    argv = llama_server_args(four, "m.gguf")
    assert argv[argv.index("-np") + 1] == "4"
    assert preset_from_mapping({"name": "one"}).parallel == 1
    assert preset_from_mapping(tomllib.loads(preset_to_toml(four))).parallel == 4
    for bad in (0, -1, 257, "4", True):
        with pytest.raises(PresetError, match="parallel"):
            preset_from_mapping({"name": "bad", "parallel": bad})


@pytest.mark.parametrize(("mmap", "mlock", "mode", "legacy"), [
    (True, False, "mmap", []),
    (True, True, "mmap+mlock", ["--mlock"]),
    (False, True, "mlock", ["--mlock", "--no-mmap"]),
    (False, False, "none", ["--no-mmap"]),
])
def test_load_flags_current_and_legacy(mmap, mlock, mode, legacy):
    preset = Preset(name="p", mmap=mmap, mlock=mlock, threads=3)
    current = llama_server_args(preset, "m.gguf")
    assert current[current.index("--load-mode") + 1] == mode
    assert current[current.index("-fa") + 1] == "off"
    old = llama_server_args(preset, "m.gguf", legacy_flags=True)
    assert [arg for arg in old if arg in ("--mlock", "--no-mmap", "-fa")] == legacy
    assert "--load-mode" not in old
    assert old[old.index("-t") + 1] == "3"


def test_legacy_flash_attention_is_a_bare_flag():
    old = llama_server_args(Preset(name="p", flash_attn=True), "m.gguf", legacy_flags=True)
    assert "-fa" in old and "on" not in old


def test_prompt_lookup_drafting_maps_to_ngram_speculation():
    argv = llama_server_args(Preset(name="p", draft_prompt_lookup=10), "m.gguf")
    assert argv[argv.index("--spec-type") + 1] == "ngram-simple"
    assert argv[argv.index("--spec-ngram-simple-size-m") + 1] == "10"
    assert argv[argv.index("--spec-ngram-simple-size-n") + 1] == "2"
    assert "--spec-type" not in llama_server_args(Preset(name="p"), "m.gguf")


def test_resolve_threads(monkeypatch):
    assert resolve_threads(Preset(name="p", threads=3)) == 3
    physical = psutil.cpu_count(logical=False)
    expected = max(1, (physical or os.cpu_count() or 1) - 1)
    assert resolve_threads(Preset(name="p", threads=0)) == expected
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: None if not logical else 6)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert resolve_threads(Preset(name="p")) == 5  # physical count unknown: logical CPUs minus one
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 1)
    assert resolve_threads(Preset(name="p")) == 1  # never zero threads


# --- preset problems against a model ---------------------------------------------------

@pytest.fixture(scope="module")
def smollm2() -> ModelInfo:
    return read_gguf(bundled_model_path())


def model_info(**overrides) -> ModelInfo:
    values = dict(source="made-up.gguf", file_size=1, version=3, architecture="phi2", name="Phi 2",
                  file_type="F16", n_layer=32, n_embd=2560, n_head=32, n_head_kv=32, head_dim_k=80,
                  head_dim_v=80, n_vocab=51200, n_ctx_train=2048, has_chat_template=False, tensors=())
    values.update(overrides)
    return ModelInfo(**values)


def test_the_bundled_model_is_what_these_checks_assume(smollm2):
    assert (smollm2.head_dim_k, smollm2.head_dim_v, smollm2.n_ctx_train, smollm2.file_type) == (64, 64, 8192, "Q4_1")


def test_as_is_has_no_problems_with_the_bundled_model(smollm2):
    assert preset_problems(load_preset("as-is"), smollm2) == ()


def test_quantized_caches_fit_the_bundled_models_head_dim(smollm2):
    for name in ("edge-int4-kv8", "long-context-kv4"):
        assert [p for p in preset_problems(load_preset(name), smollm2) if p.level == "error"] == []


def test_context_beyond_training_is_a_warning(smollm2):
    at_limit = dataclasses.replace(load_preset("long-context-kv4"), ctx_size=8192)
    assert not [p for p in preset_problems(at_limit, smollm2) if "trained" in p.message]
    beyond = dataclasses.replace(at_limit, ctx_size=16384)
    (warning,) = [p for p in preset_problems(beyond, smollm2) if "trained" in p.message]
    assert warning.level == "warning"
    assert "8192" in warning.message and "ctx_size = 8192" in warning.fix


def test_requantizing_an_already_quantized_model_is_a_warning(smollm2):
    problems = preset_problems(load_preset("quality-q8"), smollm2)
    assert [p.level for p in problems] == ["warning"]
    assert "already quantized (Q4_1)" in problems[0].message
    assert preset_problems(load_preset("quality-q8"), model_info(file_type="F16", head_dim_k=64, head_dim_v=64)) == ()


def test_quantized_v_without_flash_attention_is_an_error(smollm2):
    # Built in code (not loaded), so the file check did not stop it first.
    preset = Preset(name="p", cache_type_v="q8_0", flash_attn=False)
    (problem,) = preset_problems(preset, smollm2)
    assert problem == Problem("error", "cache_type_v = q8_0 needs flash_attn = true",
                              'Set flash_attn = true, or cache_type_v = "f16"')


def test_the_quantized_v_rule_is_llama_cpps_own(smollm2):
    """The real llama.cpp refuses exactly what the check calls an error, and accepts the fix."""
    import llama_cpp

    model_path = str(bundled_model_path())
    q8_0 = 8  # GGML_TYPE_Q8_0
    refused = Preset(name="p", cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=False)
    assert [p.level for p in preset_problems(refused, smollm2)] == ["error"]
    with pytest.raises(ValueError):
        llama_cpp.Llama(model_path, n_ctx=256, type_k=q8_0, type_v=q8_0, flash_attn=False, verbose=False)
    accepted = dataclasses.replace(refused, flash_attn=True)
    assert preset_problems(accepted, smollm2) == ()
    llama = llama_cpp.Llama(model_path, n_ctx=256, type_k=q8_0, type_v=q8_0, flash_attn=True, verbose=False)
    assert llama.n_ctx() == 256
    llama.close()


def test_cache_block_not_dividing_the_head_dim_is_an_error():
    phi = model_info(head_dim_k=80, head_dim_v=80)  # 80 is not a multiple of q8_0's block of 32
    problems = preset_problems(load_preset("edge-int4-kv8"), phi)
    errors = [p for p in problems if p.level == "error"]
    assert [p.message.split(" =")[0] for p in errors] == ["cache_type_k", "cache_type_v"]
    assert "head dimension is 80" in errors[0].message and "blocks of 32" in errors[0].message
    assert preset_problems(load_preset("balanced-q4km"), phi) == ()  # f16 has no blocks


def test_unknown_weight_type_in_code_is_an_error(smollm2):
    (problem,) = preset_problems(Preset(name="p", weights="Q4_K_X"), smollm2)
    assert problem.level == "error" and "Q4_K_M" in problem.fix


# --- CLI --------------------------------------------------------------------------------

def test_cli_lists_presets_as_a_table(capsys):
    save_user_preset(Preset(name="zz-mine", weights="Q6_K", ctx_size=1536))
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    for column in ("NAME", "WEIGHTS", "CTX", "K/V CACHE", "FLASH ATTN", "SOURCE"):
        assert column in header
    edge = next(row for row in rows if row.startswith("edge-int4-kv8"))
    assert edge.split()[:6] == ["edge-int4-kv8", "Q4_K_M", "4096", "q8_0/q8_0", "on", "shipped"]
    mine = next(row for row in rows if row.startswith("zz-mine"))
    assert mine.split()[:6] == ["zz-mine", "Q6_K", "1536", "f16/f16", "off", "user"]


def test_cli_presets_json_parses(capsys):
    assert main(["presets", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [entry["name"] for entry in listed] == list(SHIPPED)
    edge = next(entry for entry in listed if entry["name"] == "edge-int4-kv8")
    assert (edge["cache_type_v"], edge["flash_attn"], edge["origin"]) == ("q8_0", True, "shipped")


def test_cli_show_prints_toml_and_the_command(capsys):
    assert main(["presets", "show", "long-context-kv4"]) == 0
    out = capsys.readouterr().out
    toml_part, _, command_part = out.partition("# llama-server equivalent")
    assert tomllib.loads(toml_part)["cache_type_k"] == "q4_0"
    command = command_part.splitlines()[-1]
    assert command == llama_server_command(load_preset("long-context-kv4"), "MODEL.gguf")


def test_cli_show_json_with_the_bundled_model(capsys):
    assert main(["presets", "show", "as-is", "--model", "bundled", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["preset"]["name"] == "as-is"
    assert shlex.split(shown["llama_server_command"])[2] == str(bundled_model_path())


def test_cli_bad_preset_is_one_line_on_stderr(capsys, config_dir):
    assert main(["presets", "show", "edge"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'Did you mean "edge-int4-kv8"' in err
    folder = config_dir / "presets"
    folder.mkdir(parents=True)
    (folder / "typo.toml").write_text('name = "typo"\nctx = 4096\n')
    # the listing names the broken file on a line of its own and still lists the rest
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    broken = [line for line in out.splitlines() if line.startswith("broken: ")]
    assert len(broken) == 1 and broken[0].startswith(f"broken: {folder / 'typo.toml'}:2: ") and "ctx_size" in broken[0]
    assert "\nbalanced-q4km " in out
    assert main(["presets", "show", "typo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{folder / 'typo.toml'}:2" in err and "ctx_size" in err


def test_cli_table_fits_80_columns_with_descriptions_under_their_rows():
    from workbench.cli.cmd_presets import presets_table

    presets = list_presets()
    narrow = presets_table(presets, 80).splitlines()
    assert max(len(line) for line in narrow) <= 80
    edge = narrow.index(next(line for line in narrow if line.startswith("edge-int4-kv8")))
    assert narrow[edge + 1].strip() == load_preset("edge-int4-kv8").description
    piped = presets_table(presets)
    assert any(line.startswith("edge-int4-kv8") and line.endswith(load_preset("edge-int4-kv8").description)
               for line in piped.splitlines())


# -- hostile preset files (issue 10, item 6) ------------------------------------------------

NESTED = 'name = "deep"\nweights = "keep"\ntensor_split = ' + "[" * 5000 + "]" * 5000 + "\n"


def test_nested_arrays_are_one_line_not_a_recursion_error(tmp_path: Path):
    # tomllib recurses per bracket: 5000 of them raised RecursionError with a traceback.
    with pytest.raises(PresetError) as caught:
        load_preset(str(write(tmp_path, NESTED, "deep.toml")))
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'deep.toml'}:3: values nested more than 32 levels deep")
    assert "\n" not in message


def test_a_byte_order_mark_is_read_past(tmp_path: Path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b'\xef\xbb\xbfname = "bom"\nweights = "q4_k_m"\n')  # what Notepad saves as "UTF-8 with BOM"
    preset = load_preset(str(path))
    assert (preset.name, preset.weights) == ("bom", "Q4_K_M")


def test_one_broken_user_preset_is_named_and_the_others_still_listed(config_dir: Path, capsys):
    user = config_dir / "presets"
    user.mkdir(parents=True)
    write(user, NESTED, "deep.toml")
    write(user, 'name = "typo"\nctx_size = "4k"\n', "typo.toml")
    write(user, 'name = "mine"\nweights = "Q8_0"\n', "mine.toml")
    catalog = preset_catalog()
    names = [p.name for p in catalog.entries]
    assert "mine" in names and "balanced-q4km" in names and "deep" not in names and "typo" not in names
    assert [b.path for b in catalog.broken] == [str(user / "deep.toml"), str(user / "typo.toml")]
    assert [p.name for p in list_presets()] == names  # the app's selector list: no exception
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert f"broken: {user / 'deep.toml'}:3: values nested more than 32 levels deep" in out
    assert f'broken: {user / "typo.toml"}:2: ctx_size = "4k" is a text value' in out
    assert "\nmine " in out and "\nbalanced-q4km " in out
    assert main(["presets", "--json"]) == 0
    captured = capsys.readouterr()
    assert "mine" in [row["name"] for row in json.loads(captured.out)]
    assert captured.err.count("broken: ") == 2


def test_a_fifo_or_a_device_given_as_a_preset_is_named_and_never_read(tmp_path: Path):
    # A plain read of a FIFO waits for a writer for ever, and /dev/zero never ends (it grew
    # until the memory ran out): in a child capped at 1 GiB and bounded in time, so that a
    # regression fails the test instead of hanging or exhausting the machine.
    import subprocess
    import sys

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    script = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
              "from workbench.core.config.presets import load_preset\n"
              "from workbench.core.config.devices import load_device\n"
              "from workbench.core.errors import PresetError\n"
              "for load, spec in ((load_preset, sys.argv[1]), (load_preset, '/dev/zero'), (load_device, sys.argv[1])):\n"
              "    try:\n        load(spec)\n    except PresetError as error:\n        print(error)\n")
    done = subprocess.run([sys.executable, "-c", script, str(fifo)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{fifo}: is a named pipe (FIFO), not a preset file. Give the path of a preset .toml file",
        "/dev/zero: is a character device (like /dev/zero), not a preset file. Give the path of a preset .toml file",
        f"{fifo}: is a named pipe (FIFO), not a device file. Give the path of a device .toml file",
    ]
