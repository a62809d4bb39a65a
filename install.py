#!/usr/bin/env python3
"""The install command: llama.cpp built for this machine (CUDA or CPU, RPC always), then the workbench.

    python install.py              # detect, say what and why, build, install with the test tools
    python install.py --dry-run    # only say what it would run
    (with the test extras, Debian's chromium is installed through apt-get when /usr/bin/chromium is missing)
    WORKBENCH_BACKEND=cpu|cuda|vulkan python install.py   # another backend than the detected one

Your own CMAKE_ARGS are passed to llama.cpp's build after ours. pip reuses a wheel it built
before whatever CMAKE_ARGS says, so llama-cpp-python is rebuilt without pip's cache when the
installed one lacks the backend chosen (or with --rebuild), and left alone when it has it.
Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from workbench.core.config.build_choice import (  # noqa: E402 - the checkout's package, before it is installed
    BACKEND_VARIABLE,
    LLAMA_REQUIREMENT,
    BuildChoice,
    choose_build,
    cpu_flags,
    installed_backends,
    rebuild_command,
)
from workbench.core.config.gpu_hardware import detect_gpus, find_nvcc  # noqa: E402


def llama_lib_dir() -> Path | None:
    """The installed llama_cpp package's lib folder, found without importing it (no library is loaded)."""
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "lib"


def needs_rebuild(choice: BuildChoice, installed: frozenset[str] | None, *, asked: bool, overridden: bool) -> str:
    """Why llama-cpp-python must be (re)built for `choice`, or "" when the installed one will do."""
    if asked:
        return "--rebuild asks for it"
    if installed is None:
        return "llama-cpp-python is not installed"
    missing = sorted(choice.wanted_libraries - installed)
    if missing:
        return f"the installed llama.cpp has {', '.join(sorted(installed)) or 'no backend'}, not {', '.join(missing)}"
    if "amx" in installed and any(arg == "-DGGML_NATIVE=OFF" for arg in choice.cmake_args):
        return "the installed llama.cpp has the AMX buffer, which crashes it (built with -march=native)"
    extra = sorted((installed - choice.wanted_libraries) & {"cuda", "vulkan"})
    if overridden and extra:
        return f"the installed llama.cpp has {', '.join(extra)}, which {BACKEND_VARIABLE}={choice.backend} leaves out"
    return ""


def shell_text(env: dict[str, str], argv: list[str]) -> str:
    assigned = " ".join(f'{name}="{value}"' if name == "CMAKE_ARGS" else f"{name}={shlex.quote(value)}"
                        for name, value in env.items())
    return (assigned + " " if assigned else "") + " ".join(shlex.quote(word) for word in argv)


def plan(root: Path, env: dict[str, str], *, extras: str, rebuild: bool) -> tuple[BuildChoice, list[str], list]:
    """(choice, lines to print, [(env additions, argv)] to run)."""
    gpus = detect_gpus(root, env.get("PATH", ""))
    nvcc = find_nvcc(root, env.get("PATH", ""))
    on_path = nvcc is not None and Path(nvcc).parent.resolve() in {
        Path(part).resolve() for part in env.get("PATH", "").split(os.pathsep) if part}
    cpuinfo = root / "proc/cpuinfo"
    flags = cpu_flags(cpuinfo.read_text(errors="replace")) if cpuinfo.is_file() else frozenset()
    choice = choose_build(gpus, nvcc, env, path_has_nvcc=on_path, flags=flags)
    lines = [f"install: llama.cpp backend {choice.backend} (+ RPC)"]
    lines += [f"  why: {reason}" for reason in choice.reasons]
    lines.append(f"  another: {BACKEND_VARIABLE}=cpu|cuda|vulkan python install.py (now: "
                 f"{env.get(BACKEND_VARIABLE) or 'unset'})")
    if choice.error:
        return choice, lines, []
    build_env = {"CMAKE_ARGS": choice.cmake_args_text, **dict(choice.env)}
    python = [sys.executable, "-m", "pip", "install"]
    lib_dir = llama_lib_dir()
    installed = installed_backends(lib_dir)
    why = needs_rebuild(choice, installed, asked=rebuild, overridden=bool(env.get(BACKEND_VARIABLE)))
    commands = []
    if why:
        lines.append(f"  rebuild llama-cpp-python: {why} (without pip's cache, about 8 minutes on 2 cores for "
                     "the CPU; longer for CUDA)")
        commands.append((build_env, python + ["--force-reinstall", "--no-cache-dir", "--no-deps", LLAMA_REQUIREMENT]))
    else:
        lines.append(f"  llama-cpp-python stays: {lib_dir} has {', '.join(sorted(installed or ()))}")
        if env.get("CMAKE_ARGS", "").strip():
            lines.append("  your CMAKE_ARGS apply only to a rebuild: python install.py --rebuild")
    commands.append((build_env, python + ["-e", f".[{extras}]" if extras else "."]))
    lines.append(f"  same rebuild by hand: {rebuild_command(choice)}")
    return choice, lines, commands


TEST_BROWSER = Path("/usr/bin/chromium")  # the report's browser test drives this one (playwright never downloads one)


def browser_plan(extras: str, *, browser: Path = TEST_BROWSER, apt_get: str | None = None,
                 is_root: bool = False) -> tuple[list[str], list]:
    """With the test extras, the lines and [(env, argv)] that make the test browser present: Debian's chromium
    through apt-get when it is missing and apt-get can run as root; otherwise the way to get one."""
    if "test" not in extras.split(","):
        return [], []
    if browser.exists():
        return [f"  test browser: {browser} (the report's browser test)"], []
    if apt_get and is_root:
        return ([f"  test browser: {browser} is missing; the report's browser test needs it: Debian's chromium "
                 "package (apt-get update, then apt-get install chromium)"],
                [({"DEBIAN_FRONTEND": "noninteractive"}, [apt_get, "update"]),
                 ({"DEBIAN_FRONTEND": "noninteractive"}, [apt_get, "install", "-y", "--no-install-recommends",
                                                          "chromium"])])
    why = "apt-get is not here" if not apt_get else "this is not root"
    return [f"  test browser: {browser} is missing and {why}: install Chromium (Debian: `sudo apt-get install "
            "chromium`), or the report's browser test fails"], []


def scripts_dir() -> Path:
    """Where pip puts the `workbench` command: the interpreter's scripts folder, or the user scheme's where pip
    falls back to a user install (site-packages not writable)."""
    if os.access(sysconfig.get_path("purelib"), os.W_OK):
        return Path(sysconfig.get_path("scripts"))
    return Path(sysconfig.get_path("scripts", f"{os.name}_user"))


def launcher_plan(path: str, scripts: Path, pyenv: str | None) -> tuple[list[str], list]:
    """The lines and [(env, argv)] that make `workbench` a command the shell finds: `pyenv rehash` where the
    interpreter is pyenv's (the shell finds a new command through pyenv's shims only once rehashed; `pyenv exec`
    puts the version's own folder on this process's PATH, so PATH here says nothing of the shell's); nothing
    where `scripts` is on PATH; otherwise the folder to add to PATH."""
    versions = Path(pyenv).resolve().parent.parent / "versions" if pyenv else None
    if versions is not None and scripts.resolve().is_relative_to(versions.resolve()):
        return [f"  command: workbench, in {scripts}; pyenv's shims find it once rehashed (pyenv rehash)"], \
            [({}, [pyenv, "rehash"])]
    if scripts.resolve() in {Path(part).resolve() for part in path.split(os.pathsep) if part}:
        return [f"  command: workbench, in {scripts} (on PATH)"], []
    return [f"  command: workbench goes to {scripts}, which is not on PATH: add it "
            f"(export PATH=\"{scripts}:$PATH\") or run python -m workbench"], []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--rebuild", action="store_true", help="rebuild llama-cpp-python even when it has the backend")
    parser.add_argument("--extras", default="test", help="the package extras to install (default: test; '' for none)")
    parser.add_argument("--root", default="/", help=argparse.SUPPRESS)  # a recorded /proc, /sys, /etc tree (tests)
    args = parser.parse_args(argv)
    env = dict(os.environ)
    choice, lines, commands = plan(Path(args.root), env, extras=args.extras, rebuild=args.rebuild)
    browser_lines, browser_commands = browser_plan(args.extras, apt_get=shutil.which("apt-get"),
                                                   is_root=hasattr(os, "geteuid") and os.geteuid() == 0)
    launcher_lines, launcher_commands = launcher_plan(env.get("PATH", ""), scripts_dir(),
                                                      shutil.which("pyenv", path=env.get("PATH", "")))
    lines += browser_lines + launcher_lines
    commands += browser_commands + launcher_commands
    print("\n".join(lines), flush=True)
    if choice.error:
        print(f"install: {choice.error}", file=sys.stderr)
        return 2
    for extra_env, command in commands:
        print(("would run: " if args.dry_run else "running: ") + shell_text(extra_env, command), flush=True)
        if args.dry_run:
            continue
        done = subprocess.run(command, cwd=HERE, env={**env, **extra_env}, check=False)
        if done.returncode != 0:
            print(f"install: {command[0]} {' '.join(command[1:4])} failed with status {done.returncode}", file=sys.stderr)
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
