"""What the app remembers between runs: theme, last model, preset and device, chat width, system-prompt presets.

One TOML file in the config folder (`settings.toml` beside the user presets), written whole
or not at all. It is read back as outside data: bounded in size, each value checked for its
type and length; a file that cannot be used is one line and the defaults, a bad value is
named and skipped, and the app always starts.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import tomli_w

from workbench.core.errors import WorkbenchError
from workbench.core.files.json_file import write_text_replacing
from workbench.core.files.regular import read_regular_file
from workbench.core.files.safe_paths import is_control_character, shown_value
from workbench.core.paths import config_dir
from workbench.core.units import MIB

SETTINGS_FILE = "settings.toml"
MAX_SETTINGS_BYTES = MIB
MAX_NAME_CHARS = 200  # theme, preset and device names (a preset or device may be a TOML path)
MAX_PATH_CHARS = 4096
MAX_PROMPT_PRESETS = 50
MAX_PROMPT_NAME_CHARS = 64
MAX_PROMPT_CHARS = 8000
CHAT_SHARE_RANGE = (20, 80)  # percent of the width the chat pane takes beside the panels


@dataclass(frozen=True)
class AppSettings:
    theme: str = ""
    model: str = ""  # a GGUF path
    preset: str = ""
    device: str = ""
    chat_share: int = 0  # percent; 0 = the layout's own
    system_prompts: tuple[tuple[str, str], ...] = ()  # (name, text), in the order saved

    def with_prompt(self, name: str, text: str) -> AppSettings:
        """These settings with the system-prompt preset `name` saved (replacing one of that name)."""
        problem = prompt_name_problem(name) or _text_problem(text, MAX_PROMPT_CHARS)
        if problem:
            raise WorkbenchError(f"system prompt preset {shown_value(name)}: {problem}",
                                 fix=f"Use a name of 1-{MAX_PROMPT_NAME_CHARS} printable characters and at most "
                                 f"{MAX_PROMPT_CHARS:,} characters of prompt")
        kept = tuple((n, t) for n, t in self.system_prompts if n != name)
        if len(kept) >= MAX_PROMPT_PRESETS:
            raise WorkbenchError(f"{MAX_PROMPT_PRESETS} system prompt presets are saved already",
                                 fix="Delete one first")
        return replace(self, system_prompts=kept + ((name, text),))

    def without_prompt(self, name: str) -> AppSettings:
        return replace(self, system_prompts=tuple((n, t) for n, t in self.system_prompts if n != name))


@dataclass(frozen=True)
class LoadedSettings:
    settings: AppSettings
    problem: str = ""  # one line: why the file (or some of its values) was ignored; "" when all was read


def settings_path() -> Path:
    return config_dir() / SETTINGS_FILE


def load_settings(path: Path | None = None) -> LoadedSettings:
    """The remembered settings; a missing file is the defaults, a bad one the defaults and one line why."""
    path = path or settings_path()
    if not path.exists() and not path.is_symlink():
        return LoadedSettings(AppSettings())
    fix = "it is ignored (the defaults are used) and rewritten when a setting changes"
    try:
        data = read_regular_file(path, max_bytes=MAX_SETTINGS_BYTES, what="a settings file", fix=fix)
        table = tomllib.loads(data.decode("utf-8"))
    except WorkbenchError as error:
        return LoadedSettings(AppSettings(), f"settings: {error.where}: {error.what}; {fix}")
    except OSError as error:
        return LoadedSettings(AppSettings(), f"settings: {path}: cannot read it ({error.strerror or error}); {fix}")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as error:
        reason = "is not UTF-8 text" if isinstance(error, UnicodeDecodeError) else f"is not valid TOML ({error})"
        return LoadedSettings(AppSettings(), f"settings: {path}: {reason[:200]}; {fix}")
    settings, problems = _checked(table)
    problem = f"settings: {path}: {'; '.join(problems[:5])}; those values are ignored" if problems else ""
    return LoadedSettings(settings, problem)


def save_settings(settings: AppSettings, path: Path | None = None) -> str:
    """Write the settings whole; "" when done, else one line why not (the app goes on without)."""
    path = path or settings_path()
    values: dict = {key: getattr(settings, key) for key in ("theme", "model", "preset", "device") if getattr(settings, key)}
    if settings.chat_share:
        values["chat_share"] = settings.chat_share
    if settings.system_prompts:
        values["system_prompts"] = [{"name": name, "text": text} for name, text in settings.system_prompts]
    try:
        write_text_replacing(path, "# Written by the Edge LLM Workbench: what the app remembers between runs.\n"
                             + tomli_w.dumps(values))
    except OSError as error:
        return f"settings: cannot write {path} ({error.strerror or error}); they are not remembered"
    return ""


def prompt_name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return "the name is empty"
    return _text_problem(name, MAX_PROMPT_NAME_CHARS) or (
        "the name holds a control character" if any(is_control_character(c) for c in name) else None)


def _text_problem(value: object, limit: int) -> str | None:
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if len(value) > limit:
        return f"is longer than {limit:,} characters"
    if "\x00" in value:
        return "holds a NUL character"
    return None


def _checked(table: dict) -> tuple[AppSettings, list[str]]:
    problems: list[str] = []
    values: dict = {}
    for key, limit in (("theme", MAX_NAME_CHARS), ("model", MAX_PATH_CHARS), ("preset", MAX_NAME_CHARS),
                       ("device", MAX_NAME_CHARS)):
        if key not in table:
            continue
        problem = _text_problem(table[key], limit) or (
            "holds a control character" if any(is_control_character(c) for c in table[key]) else None)
        if problem:
            problems.append(f"{key} {problem}")
        else:
            values[key] = table[key]
    if "chat_share" in table:
        share = table["chat_share"]
        low, high = CHAT_SHARE_RANGE
        if isinstance(share, bool) or not isinstance(share, int) or not low <= share <= high:
            problems.append(f"chat_share {shown_value(share, 40)} is not a whole percent in {low}-{high}")
        else:
            values["chat_share"] = share
    prompts = table.get("system_prompts", [])
    if not isinstance(prompts, list):
        problems.append("system_prompts is not a list of {name, text} tables")
        prompts = []
    if len(prompts) > MAX_PROMPT_PRESETS:
        problems.append(f"more than {MAX_PROMPT_PRESETS} system_prompts: the rest is skipped")
    kept: dict[str, str] = {}
    for number, entry in enumerate(prompts[:MAX_PROMPT_PRESETS], start=1):
        if not isinstance(entry, dict) or prompt_name_problem(entry.get("name")) or \
                _text_problem(entry.get("text"), MAX_PROMPT_CHARS):
            problems.append(f"system_prompts entry {number} is not a name (1-{MAX_PROMPT_NAME_CHARS} characters) "
                            f"and a text (at most {MAX_PROMPT_CHARS:,} characters)")
            continue
        kept[entry["name"]] = entry["text"]
    unknown = sorted(set(table) - {"theme", "model", "preset", "device", "chat_share", "system_prompts"})
    if unknown:
        problems.append(f"unknown keys {', '.join(shown_value(k, 30) for k in unknown[:5])}")
    return AppSettings(**values, system_prompts=tuple(kept.items())), problems
