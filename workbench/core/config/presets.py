"""Quantization presets: shipped and user TOML files, checks, saving, and llama-server flags."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomli_w

from workbench.core import paths
from workbench.core.config.chat_mode import BUILTIN_TEMPLATE_NAMES, COMPLETION
from workbench.core.config.cpu_topology import CpuTopology
from workbench.core.config.limits import CTX_MAX, CTX_MIN
from workbench.core.config.preset import Preset
from workbench.core.config.preset_cores import (
    CORE_KEYS,
    core_choice,
    cores_problems,
    cores_server_args,
    cores_toml,
    cpu_cores_field,
)
from workbench.core.config.preset_split import SPLIT_KEYS, split_fields, split_problems, split_server_args, split_toml
from workbench.core.config.toml_checks import (
    Catalog,
    TomlSource,
    catalog_files,
    catalog_origin,
    check_known_keys,
    closest,
    get_bool,
    get_int,
    get_str,
    load_catalog,
    load_entry_file,
    looks_like_path,
    text_of,
    unknown_name,
)
from workbench.core.errors import PresetError
from workbench.core.gguf import ggml_types
from workbench.core.gguf.model_info import ModelInfo

PRESET_KEYS = (
    "name", "description", "weights", "ctx_size", "batch_size", "ubatch_size", "threads",
    "cache_type_k", "cache_type_v", "flash_attn", "mlock", "mmap", "draft_prompt_lookup", "swa_full",
    "parallel", "chat_template", "special_tokens_in_messages",
)
PRESET_KEYS += CORE_KEYS + SPLIT_KEYS
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# llama.cpp's own ceilings are far above these; past them a value is a typo, not a plan.
_MAX_CTX = CTX_MAX  # config/limits.py: the CLI and the app's editor take the same
_MAX_BATCH = 1 << 20
_MAX_THREADS = 1024
_MAX_DRAFT = 128
MAX_PARALLEL = 256  # llama-cparams.h LLAMA_MAX_SEQ: llama.cpp refuses more sequences
PROMPT_LOOKUP_NGRAM = 2  # tokens matched to find a draft (llama-cpp-python's default max_ngram_size)


@dataclass(frozen=True)
class Problem:
    """Something wrong with a preset for a particular model, and what to do about it."""

    level: Literal["error", "warning"]
    message: str
    fix: str


def shipped_presets_dir() -> Path:
    return paths.data_dir("presets")


def user_presets_dir() -> Path:
    return paths.config_dir() / "presets"


def _valid_weights() -> str:
    return "keep, " + ", ".join(ggml_types.QUANT_TYPES)


def _normalise_weights(value: str, source: TomlSource) -> str:
    if value.lower() == "keep":
        return "keep"
    if value.upper() in ggml_types.QUANT_TYPES:
        return value.upper()
    guess = closest(value.upper(), tuple(ggml_types.QUANT_TYPES))
    hint = f"Did you mean {guess}? " if guess else ""
    raise PresetError(f'weights = "{value}" is not a weight type llama.cpp can quantize to',
                      where=source.where("weights"), fix=f"{hint}Use one of: {_valid_weights()}")


def _normalise_cache_type(key: str, value: str, source: TomlSource) -> str:
    if value.lower() in ggml_types.CACHE_TYPES:
        return value.lower()
    guess = closest(value.lower(), tuple(ggml_types.CACHE_TYPES))
    hint = f"Did you mean {guess}? " if guess else ""
    raise PresetError(f'{key} = "{value}" is not a KV-cache type llama.cpp accepts', where=source.where(key),
                      fix=f"{hint}Use one of: {', '.join(ggml_types.CACHE_TYPES)}")


def _checked_chat_template(value: str, source: TomlSource) -> str:
    if value in ("", COMPLETION) or value in BUILTIN_TEMPLATE_NAMES:
        return value
    guess = closest(value, BUILTIN_TEMPLATE_NAMES + (COMPLETION,))
    hint = f"Did you mean {guess}? " if guess else ""
    raise PresetError(f'chat_template = "{value}" is not one of llama.cpp\'s built-in templates',
                      where=source.where("chat_template"),
                      fix=f'{hint}Use "" (the model\'s own), "completion" (no template) or one of: '
                          f"{', '.join(BUILTIN_TEMPLATE_NAMES)}")


def _preset_from_source(data: dict[str, Any], source: TomlSource, default_name: str = "") -> Preset:
    check_known_keys(data, PRESET_KEYS, source, "preset")
    name = get_str(data, "name", default_name, source, example='name = "my-preset"')
    if not name:
        raise PresetError("missing name", where=source.where(), fix='Add a line like name = "my-preset"')
    weights = _normalise_weights(get_str(data, "weights", "keep", source, example='weights = "Q4_K_M"'), source)
    ctx_size = get_int(data, "ctx_size", 2048, source, minimum=CTX_MIN, maximum=_MAX_CTX,
                       example="ctx_size = 4096", unit="tokens")
    batch_size = get_int(data, "batch_size", 512, source, minimum=1, maximum=_MAX_BATCH,
                         example="batch_size = 512", unit="tokens")
    ubatch_size = get_int(data, "ubatch_size", min(512, batch_size), source, minimum=1, maximum=_MAX_BATCH,
                          example="ubatch_size = 512", unit="tokens")
    if ubatch_size > batch_size:
        raise PresetError(f"ubatch_size = {ubatch_size} is larger than batch_size = {batch_size}",
                          where=source.where("ubatch_size"),
                          fix=f"The physical batch is a slice of the logical one: set ubatch_size <= {batch_size}")
    threads = get_int(data, "threads", 0, source, minimum=0, maximum=_MAX_THREADS,
                      example="threads = 0  (0 = the fast cores, or physical cores minus one)")
    cache_type_k = _normalise_cache_type(
        "cache_type_k", get_str(data, "cache_type_k", "f16", source, example='cache_type_k = "q8_0"'), source)
    cache_type_v = _normalise_cache_type(
        "cache_type_v", get_str(data, "cache_type_v", "f16", source, example='cache_type_v = "q8_0"'), source)
    flash_attn = get_bool(data, "flash_attn", False, source)
    if ggml_types.cache_type(cache_type_v).quantized and not flash_attn:
        key = "flash_attn" if "flash_attn" in data else "cache_type_v"
        raise PresetError(f"cache_type_v = {cache_type_v} needs flash_attn = true", where=source.where(key),
                          fix='llama.cpp only quantizes the V cache inside flash attention: set flash_attn = true, '
                              'or cache_type_v = "f16"')
    return Preset(
        name=name,
        description=get_str(data, "description", "", source, example='description = "what it is for"'),
        weights=weights,
        ctx_size=ctx_size,
        batch_size=batch_size,
        ubatch_size=ubatch_size,
        threads=threads,
        cache_type_k=cache_type_k,
        cache_type_v=cache_type_v,
        flash_attn=flash_attn,
        mlock=get_bool(data, "mlock", False, source),
        mmap=get_bool(data, "mmap", True, source),
        draft_prompt_lookup=get_int(data, "draft_prompt_lookup", 0, source, minimum=0, maximum=_MAX_DRAFT,
                                    example="draft_prompt_lookup = 10  (0 = off)", unit="draft tokens"),
        swa_full=get_bool(data, "swa_full", False, source),
        parallel=get_int(data, "parallel", 1, source, minimum=1, maximum=MAX_PARALLEL,
                         example="parallel = 4  (llama-server -np: sequences decoded together)", unit="sequences"),
        chat_template=_checked_chat_template(
            get_str(data, "chat_template", "", source, example='chat_template = "chatml"'), source),
        special_tokens_in_messages=get_bool(data, "special_tokens_in_messages", False, source),
        source=source.label if source.text else "",
        cpu_cores=cpu_cores_field(data, source),
        **split_fields(data, source),
    )


def preset_from_mapping(data: dict[str, Any], source: str = "") -> Preset:
    """A checked Preset from plain values (as a TOML file would give them); PresetError if wrong.

    `source` names where the values came from; when it is a readable file, errors carry
    the line of the offending key.
    """
    preset = _preset_from_source(dict(data), TomlSource(source or "preset", text_of(source)))
    return dataclasses.replace(preset, source=source)


def _load_preset_file(path: Path, *, catalog: bool) -> Preset:
    return load_entry_file(path, "preset", _preset_from_source, catalog=catalog)


def _catalog_files() -> dict[str, Path]:
    return catalog_files(shipped_presets_dir(), user_presets_dir())


def load_preset(spec: str) -> Preset:
    """A preset by name (user presets win over shipped ones) or by path to a TOML file."""
    if looks_like_path(spec):
        return _load_preset_file(Path(spec).expanduser(), catalog=False)
    files = _catalog_files()
    if spec in files:
        return _load_preset_file(files[spec], catalog=True)
    raise unknown_name(spec, sorted(files), "preset")


def preset_catalog() -> Catalog[Preset]:
    """Every shipped and user preset that loads, by name, and the files that do not (with why).

    A user preset replaces a shipped one of its name. One malformed file is named in
    `broken`; it never hides the others.
    """
    return load_catalog(_catalog_files(), lambda path: _load_preset_file(path, catalog=True))


def list_presets() -> tuple[Preset, ...]:
    """The presets of `preset_catalog()` that load (a malformed file is left out)."""
    return preset_catalog().entries


def preset_origin(preset: Preset) -> str:
    """Where a preset lives: "shipped", "user", "file" (elsewhere) or "built-in" (made in code)."""
    return catalog_origin(preset.source, shipped_presets_dir(), user_presets_dir())


def preset_to_toml(preset: Preset) -> str:
    """The preset as a TOML file in the shipped format (the keys a file may hold, in file order)."""
    values = {key: getattr(preset, key) for key in PRESET_KEYS if key not in SPLIT_KEYS + CORE_KEYS}
    return tomli_w.dumps(values | cores_toml(preset) | split_toml(preset))


def save_user_preset(preset: Preset) -> Path:
    """Write `preset` to the user's preset folder as NAME.toml (replacing one of that name)."""
    if not _SAFE_NAME.match(preset.name):
        raise PresetError(f'preset name "{preset.name}" cannot be a file name',
                          fix="Use letters, digits, '.', '_' or '-' (up to 64), starting with a letter or digit")
    text = preset_to_toml(preset)
    # Check it the way loading will, so a saved preset always loads again.
    preset_from_mapping(tomllib.loads(text))
    folder = user_presets_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{preset.name}.toml"
    temporary = path.with_suffix(".toml.tmp")
    temporary.write_text(f"# Saved by the Edge LLM Workbench.\n{text}", encoding="utf-8")
    temporary.replace(path)  # atomic: a crash never leaves half a preset behind
    return path


def shipped_preset_names() -> frozenset[str]:
    """The names of the presets shipped inside the package (a user file may replace one)."""
    folder = shipped_presets_dir()
    return frozenset(path.stem for path in folder.glob("*.toml")) if folder.is_dir() else frozenset()


def shadows_shipped(name: str) -> bool:
    """Whether a user preset of `name` replaces the shipped one of the same name."""
    return name in shipped_preset_names() and (user_presets_dir() / f"{name}.toml").is_file()


def revert_user_preset(name: str) -> Path:
    """Bring back the shipped preset `name`: its user replacement is renamed NAME.toml.reverted
    (kept, but no longer a preset). Returns the kept file."""
    if name not in shipped_preset_names():
        raise PresetError(f'"{name}" is not a shipped preset, so there is nothing to revert to',
                          fix="`workbench presets` lists the shipped ones; a user-only preset is a file "
                              f"in {user_presets_dir()} you can delete")
    path = user_presets_dir() / f"{name}.toml"
    if not path.is_file():
        raise PresetError(f'the shipped preset "{name}" is already in use (no user preset replaces it)',
                          where=str(user_presets_dir()), fix="nothing to do")
    kept = path.with_name(f"{name}.toml.reverted")
    path.replace(kept)
    return kept


def resolve_threads(preset: Preset, topology: CpuTopology | None = None) -> int:
    """The thread count a preset means on this machine (or the one `topology` describes): its own;
    for 0 one per fast core on big.LITTLE boards (or per CPU in its cpu_cores), else physical
    cores minus one (>= 1). See preset_cores.core_choice for the CPUs they are pinned to."""
    return core_choice(preset, topology).threads


def _load_mode(preset: Preset) -> str:
    if preset.mmap and preset.mlock:
        return "mmap+mlock"
    if preset.mmap:
        return "mmap"
    return "mlock" if preset.mlock else "none"


def llama_server_args(preset: Preset, model_path: str | os.PathLike[str], *,
                      legacy_flags: bool = False, topology: CpuTopology | None = None) -> tuple[str, ...]:
    """The llama-server argument vector equivalent to `preset` (see llama_server_command) on this
    machine (or the one `topology` describes): threads and pinning resolved as the engine does."""
    cores = core_choice(preset, topology)
    args = [
        "llama-server", "-m", str(model_path),
        "-c", str(preset.ctx_size),
        "-b", str(preset.batch_size),
        "-ub", str(preset.ubatch_size),
        "-t", str(cores.threads),
        "-ctk", preset.cache_type_k,
        "-ctv", preset.cache_type_v,
    ]
    if legacy_flags:
        # Builds from before the `-fa on|off` and `--load-mode` spellings.
        args += ["-fa"] if preset.flash_attn else []
        args += ["--mlock"] if preset.mlock else []
        args += [] if preset.mmap else ["--no-mmap"]
    else:
        args += ["-fa", "on" if preset.flash_attn else "off", "--load-mode", _load_mode(preset)]
    if preset.chat_template and preset.chat_template != "completion":
        args += ["--chat-template", preset.chat_template]  # llama-server takes llama.cpp's built-in names
    args += ["-np", str(preset.parallel)]  # llama-server's own default picks the slots itself
    if preset.swa_full:
        args += ["--swa-full"]  # llama-server's default keeps sliding-window layers to their window
    if preset.draft_prompt_lookup:
        # Prompt-lookup drafting: after the last 2 tokens recur earlier in the text, the tokens
        # that followed them there are the draft. 2 is the engine's n-gram (llama-cpp-python's
        # LlamaPromptLookupDecoding default); the preset's number is the draft length.
        args += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(PROMPT_LOOKUP_NGRAM),
                 "--spec-ngram-simple-size-m", str(preset.draft_prompt_lookup)]
    args += cores_server_args(cores.cpus)
    args += split_server_args(preset)
    return tuple(args)


def llama_server_command(preset: Preset, model_path: str | os.PathLike[str], *,
                         legacy_flags: bool = False) -> str:
    """The `llama-server ...` command line that runs the model as this preset does.

    Uses llama-server's current spellings (`-fa on|off`, `--load-mode mmap|none|mlock|
    mmap+mlock`); `legacy_flags=True` gives older builds' `-fa`, `--mlock`, `--no-mmap`.
    `threads = 0` is resolved for this machine.
    """
    return shlex.join(llama_server_args(preset, model_path, legacy_flags=legacy_flags))


def preset_problems(preset: Preset, model: ModelInfo) -> tuple[Problem, ...]:
    """What stops `preset` from running `model` (errors) or makes it a poor idea (warnings)."""
    problems: list[Problem] = []
    if preset.weights != "keep" and preset.weights not in ggml_types.QUANT_TYPES:
        problems.append(Problem("error", f"weights = {preset.weights} is not a type llama.cpp can quantize to",
                                f"Use one of: {_valid_weights()}"))
    for key, type_name, head_dim, side in (
        ("cache_type_k", preset.cache_type_k, model.head_dim_k, "K"),
        ("cache_type_v", preset.cache_type_v, model.head_dim_v, "V"),
    ):
        kind = ggml_types.CACHE_TYPES.get(type_name.lower())
        if kind is None:
            problems.append(Problem("error", f"{key} = {type_name} is not a KV-cache type llama.cpp accepts",
                                    f"Use one of: {', '.join(ggml_types.CACHE_TYPES)}"))
            continue
        if head_dim % kind.block_size:
            problems.append(Problem(
                "error",
                f"{key} = {type_name} stores blocks of {kind.block_size} values but {model.name or 'the model'}'s "
                f"{side} head dimension is {head_dim}",
                f'Use {key} = "f16" (or q8_0 only if the head dimension is a multiple of 32)'))
        if side == "V" and kind.quantized and not preset.flash_attn:
            problems.append(Problem("error", f"cache_type_v = {type_name} needs flash_attn = true",
                                    'Set flash_attn = true, or cache_type_v = "f16"'))
    if model.n_ctx_train and preset.ctx_size > model.n_ctx_train:
        problems.append(Problem(
            "warning",
            f"ctx_size = {preset.ctx_size} is beyond the {model.n_ctx_train} tokens "
            f"{model.name or 'the model'} was trained for",
            f"Set ctx_size = {model.n_ctx_train} or less; past it answers degrade and the KV cache grows for nothing"))
    already = model.file_type
    if (preset.weights in ggml_types.QUANT_TYPES and already in ggml_types.QUANT_TYPES
            and already not in ("F16", "BF16") and already != preset.weights):
        problems.append(Problem(
            "warning",
            f"the model is already quantized ({already}); re-quantizing to {preset.weights} keeps "
            f"{already}'s losses and adds its own",
            "Start from an F16/BF16 GGUF of the model, or use the as-is preset"))
    if preset.n_cpu_moe > model.n_layer:
        problems.append(Problem("error", f"n_cpu_moe = {preset.n_cpu_moe} is more than the {model.n_layer} layers of "
                                         f"{model.name or 'the model'}", f"Set n_cpu_moe = {model.n_layer} or less"))
    elif preset.n_cpu_moe and not any("_exps." in tensor.name for tensor in model.tensors):
        problems.append(Problem("warning", f"n_cpu_moe = {preset.n_cpu_moe} does nothing: {model.name or 'the model'} "
                                           "has no routed experts", "Leave n_cpu_moe out (or 0) for a dense model"))
    problems += [Problem(level, message, fix) for level, message, fix in split_problems(preset) + cores_problems(preset)]
    return tuple(problems)
