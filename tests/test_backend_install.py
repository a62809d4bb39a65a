"""The install's backend choice: CUDA on a Jetson (captured tree + a fake nvcc), CPU without a GPU, overrides."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from workbench.core.config.build_choice import (
    LLAMA_REQUIREMENT,
    BuildChoice,
    choose_build,
    cpu_flags,
    installed_backends,
    rebuild_command,
)
from workbench.core.config.gpu_hardware import detect_gpus, find_nvcc

REPO = Path(__file__).resolve().parent.parent
SYSFS = Path(__file__).parent / "sysfs"
ORIN = SYSFS / "jetson-orin-nano"


def _fake_tool(folder: Path, name: str, output: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    tool.chmod(0o755)
    return tool


def _install(root: Path, path: str, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """install.py --dry-run under `python -S`: no site-packages, so it proves it needs the standard library only."""
    return subprocess.run([sys.executable, "-S", str(REPO / "install.py"), "--dry-run", "--root", str(root), *extra],
                          capture_output=True, text=True, timeout=60, env={"PATH": path, **(env or {})}, cwd=REPO)


def test_jetson_orin_with_nvcc_on_path_builds_cuda_87(tmp_path):
    _fake_tool(tmp_path / "bin", "nvcc")
    done = _install(ORIN, str(tmp_path / "bin"))
    assert done.returncode == 0, done.stderr
    assert "install: llama.cpp backend cuda (+ RPC)" in done.stdout
    assert "nvidia,tegra234" in done.stdout
    runs = [line for line in done.stdout.splitlines() if line.startswith("would run: ")]
    assert len(runs) == 2  # no llama_cpp without site-packages: the rebuild, then the package
    assert runs[0].startswith('would run: CMAKE_ARGS="-DGGML_RPC=on -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87" ')
    assert "-m pip install --force-reinstall --no-cache-dir --no-deps 'llama-cpp-python>=0.3.36,<0.3.37'" in runs[0]
    assert runs[1].endswith("-m pip install -e '.[test]'")


def test_jetson_with_nvcc_only_in_usr_local_cuda_names_it_for_cmake(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(ORIN, root)
    nvcc = _fake_tool(root / "usr/local/cuda/bin", "nvcc")
    choice = choose_build(detect_gpus(root, ""), find_nvcc(root, ""), {}, path_has_nvcc=False)
    assert choice.backend == "cuda"
    assert ("CUDACXX", str(nvcc)) in choice.env
    assert rebuild_command(choice).startswith(f"CUDACXX={nvcc} CMAKE_ARGS=")


def test_jetson_without_nvcc_builds_for_the_cpu_and_says_why():
    gpus = detect_gpus(ORIN, "")
    choice = choose_build(gpus, find_nvcc(ORIN, ""), {})
    assert choice.backend == "cpu"
    assert choice.cmake_args == ("-DGGML_RPC=on",)
    assert "Jetson Orin GPU" in choice.reasons[0] and "no CUDA compiler" in choice.reasons[0]


def test_no_gpu_with_nvcc_builds_for_the_cpu(tmp_path):
    _fake_tool(tmp_path / "bin", "nvcc")
    done = _install(SYSFS / "x86-laptop", str(tmp_path / "bin"))
    assert done.returncode == 0, done.stderr
    assert "install: llama.cpp backend cpu (+ RPC)" in done.stdout
    assert "but there is no GPU for it" in done.stdout
    assert 'would run: CMAKE_ARGS="-DGGML_RPC=on" ' in done.stdout


@pytest.mark.parametrize(("tree", "arch"), [("jetson-nano", "53"), ("jetson-orin-nano", "87")])
def test_jetson_soc_gives_its_cuda_architecture(tree, arch):
    gpus = detect_gpus(SYSFS / tree, "")
    assert gpus.jetson is not None and gpus.cuda_archs == (arch,)


def test_l4t_r36_without_a_device_tree_is_an_orin(tmp_path):
    (tmp_path / "etc").mkdir()
    # the first line as published in jetson-containers' docs and many JetPack 6.0 reports
    (tmp_path / "etc/nv_tegra_release").write_text(
        "# R36 (release), REVISION: 3.0, GCID: 36923193, BOARD: generic, EABI: aarch64, DATE: Fri Jul 19 23:24:25 UTC 2024\n")
    gpus = detect_gpus(tmp_path, "")
    assert gpus.jetson.l4t == "R36.3.0" and gpus.cuda_archs == ("87",)


def test_desktop_gpus_from_nvidia_smi(tmp_path):
    _fake_tool(tmp_path, "nvidia-smi", "NVIDIA GeForce RTX 4090, 8.9\\nNVIDIA A100-SXM4-80GB, 8.0\\n")
    _fake_tool(tmp_path, "nvcc")
    gpus = detect_gpus(SYSFS / "x86-laptop", str(tmp_path))
    choice = choose_build(gpus, find_nvcc(SYSFS / "x86-laptop", str(tmp_path)), {})
    assert [gpu.name for gpu in gpus.nvidia] == ["NVIDIA GeForce RTX 4090", "NVIDIA A100-SXM4-80GB"]
    assert "-DCMAKE_CUDA_ARCHITECTURES=89;80" in choice.cmake_args


def test_hostile_inputs_are_bounded_and_not_guessed_from(tmp_path):
    _fake_tool(tmp_path / "bin", "nvidia-smi", "$(reboot), 9.0\\n" + "A" * 5000 + ", 12.0\\n")
    (tmp_path / "proc/device-tree").mkdir(parents=True)
    (tmp_path / "proc/device-tree/compatible").write_bytes(b"x" * (1 << 20) + b"\0nvidia,tegra234\0")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nv_tegra_release").write_text("R99 nonsense\n")
    gpus = detect_gpus(tmp_path, str(tmp_path / "bin"))
    assert gpus.jetson is None  # the tegra234 lies past the bounded read
    assert any("not an L4T release line" in note for note in gpus.notes)
    assert [gpu.name for gpu in gpus.nvidia] == ["$(reboot)"]  # printable, kept as text, never run
    assert any("not understood" in note for note in gpus.notes)


def test_override_and_user_cmake_args(tmp_path):
    gpus = detect_gpus(ORIN, "")
    nvcc = _fake_tool(tmp_path, "nvcc")
    cpu = choose_build(gpus, nvcc, {"WORKBENCH_BACKEND": "cpu"})
    assert cpu.backend == "cpu" and cpu.cmake_args == ("-DGGML_RPC=on",)
    own = choose_build(gpus, nvcc, {"CMAKE_ARGS": "-DCMAKE_CUDA_ARCHITECTURES=87;72 -DGGML_CUDA_F16=on"})
    assert own.cmake_args == ("-DGGML_RPC=on", "-DGGML_CUDA=on", "-DCMAKE_CUDA_ARCHITECTURES=87;72", "-DGGML_CUDA_F16=on")
    assert choose_build(gpus, nvcc, {"WORKBENCH_BACKEND": "metal"}).error
    assert "not a -DNAME=value" in choose_build(gpus, nvcc, {"CMAKE_ARGS": '-DX=1 "$(rm -rf ~)"'}).error


def test_bad_override_is_one_line_and_status_2(tmp_path):
    done = _install(SYSFS / "x86-laptop", str(tmp_path), env={"WORKBENCH_BACKEND": "rocm"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["install: WORKBENCH_BACKEND='rocm' is not one of cpu, cuda, vulkan"]


def test_rebuild_only_when_the_installed_build_lacks_the_backend(tmp_path):
    sys.path.insert(0, str(REPO))
    try:
        import install  # the top-level script, importable for its functions
    finally:
        sys.path.remove(str(REPO))
    cuda = BuildChoice("cuda", (), (), ())
    cpu = BuildChoice("cpu", (), (), ())
    assert install.needs_rebuild(cuda, frozenset({"cpu", "rpc"}), asked=False, overridden=False) == \
        "the installed llama.cpp has cpu, rpc, not cuda"
    assert install.needs_rebuild(cpu, frozenset({"cpu", "rpc"}), asked=False, overridden=False) == ""
    assert install.needs_rebuild(cpu, frozenset({"cpu"}), asked=False, overridden=False).endswith("not rpc")
    assert install.needs_rebuild(cpu, None, asked=False, overridden=False) == "llama-cpp-python is not installed"
    assert install.needs_rebuild(cpu, frozenset({"cpu", "rpc", "cuda"}), asked=False, overridden=True)
    assert install.needs_rebuild(cpu, frozenset({"cpu", "rpc", "cuda"}), asked=False, overridden=False) == ""
    no_amx = BuildChoice("cpu", ("-DGGML_RPC=on", "-DGGML_NATIVE=OFF"), (), ())
    assert "AMX" in install.needs_rebuild(no_amx, frozenset({"cpu", "rpc", "amx"}), asked=False, overridden=False)
    assert install.needs_rebuild(no_amx, frozenset({"cpu", "rpc"}), asked=False, overridden=False) == ""
    for name in ("libggml-cpu.so", "libggml-rpc.so", "libggml-cuda.so"):
        (tmp_path / name).write_bytes(b"")
    assert installed_backends(tmp_path) == frozenset({"cpu", "rpc", "cuda"})
    assert installed_backends(tmp_path / "absent") is None


def test_the_pinned_requirement_is_pyprojects():
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert LLAMA_REQUIREMENT in dependencies


def test_ci_runs_the_readmes_install_command():
    readme = (REPO / "README.md").read_text()
    install_block = readme.split("## Install", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0].strip()
    assert install_block == "python install.py"
    assert install_block in (REPO / ".ci/run").read_text().splitlines()


def test_render_nodes_are_bounded_and_odd_uevents_ignored(tmp_path):
    drm = tmp_path / "sys/class/drm"
    for number in range(128, 128 + 40):
        (drm / f"renderD{number}/device").mkdir(parents=True)
        (drm / f"renderD{number}/device/uevent").write_text("DRIVER=panthor\nOF_COMPATIBLE_0=rockchip,rk3588-mali\n")
    (drm / "renderD128/device/uevent").write_text("DRIVER=evil driver; rm -rf /\n" + "X" * 10000)
    (drm / "card0").mkdir()  # not a render node
    nodes = detect_gpus(tmp_path, "").render_nodes
    assert len(nodes) == 15  # 16 looked at, the first has no driver we can read
    assert {node.kind for node in nodes} == {"Arm Mali (panthor)"}
    assert "llama.cpp/issues/17783" in nodes[0].vulkan_note


def test_a_driver_without_nvidia_smi_builds_for_the_native_architecture(tmp_path):
    card = tmp_path / "proc/driver/nvidia/gpus/0000:01:00.0"
    card.mkdir(parents=True)
    # the Model: line of the driver's information file (other lines left out)
    (card / "information").write_text("Model: \t\t NVIDIA GeForce RTX 3060\nIRQ:   \t\t 139\n")
    nvcc = _fake_tool(tmp_path / "bin", "nvcc")
    gpus = detect_gpus(tmp_path, str(tmp_path / "bin"))
    assert [gpu.name for gpu in gpus.nvidia] == ["NVIDIA GeForce RTX 3060"]
    choice = choose_build(gpus, nvcc, {})
    assert choice.cmake_args[-1] == "-DCMAKE_CUDA_ARCHITECTURES=native"


def test_the_test_extras_bring_debians_chromium_when_it_is_missing(tmp_path):
    sys.path.insert(0, str(REPO))
    try:
        import install  # the top-level script, importable for its functions
    finally:
        sys.path.remove(str(REPO))
    missing, present = tmp_path / "chromium", tmp_path / "here"
    present.write_bytes(b"")
    lines, commands = install.browser_plan("test", browser=missing, apt_get="/usr/bin/apt-get", is_root=True)
    assert [argv for _, argv in commands] == [["/usr/bin/apt-get", "update"],
                                              ["/usr/bin/apt-get", "install", "-y", "--no-install-recommends", "chromium"]]
    assert all(env == {"DEBIAN_FRONTEND": "noninteractive"} for env, _ in commands)
    assert "is missing" in lines[0] and "browser test needs it" in lines[0]
    for kwargs, why in (({"apt_get": None, "is_root": True}, "apt-get is not here"),
                        ({"apt_get": "/usr/bin/apt-get", "is_root": False}, "this is not root")):
        lines, commands = install.browser_plan("test", browser=missing, **kwargs)
        assert commands == [] and why in lines[0] and "apt-get install chromium" in lines[0]
    assert install.browser_plan("test", browser=present, apt_get="/usr/bin/apt-get", is_root=True)[1] == []
    assert install.browser_plan("", browser=missing, apt_get="/usr/bin/apt-get", is_root=True) == ([], [])


def test_the_dry_run_names_the_test_browser():
    done = subprocess.run([sys.executable, str(REPO / "install.py"), "--dry-run"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    browser = [line for line in done.stdout.splitlines() if "test browser" in line]
    assert len(browser) == 1 and browser[0].startswith("  test browser: /usr/bin/chromium")


def test_a_cpu_with_amx_is_built_without_it_and_one_without_amx_natively():
    """llama.cpp's AMX buffer (compiled by -march=native on a CPU with AMX) segfaulted on the bundled model and
    aborted every MLA load on the captured Xeon; the build names its instruction sets instead."""
    xeon = cpu_flags((SYSFS / "xeon-amx/proc/cpuinfo").read_text())
    assert {"amx_int8", "avx512f", "avx2"} <= xeon
    amx = choose_build(detect_gpus(SYSFS / "xeon-amx", ""), None, {}, flags=xeon)
    assert "-DGGML_NATIVE=OFF" in amx.cmake_args and "-DGGML_AVX512=ON" in amx.cmake_args
    assert "-DGGML_AVX2=ON" in amx.cmake_args and not any("AMX" in arg for arg in amx.cmake_args)
    assert any("AMX" in reason for reason in amx.reasons)
    laptop = choose_build(detect_gpus(SYSFS / "x86-laptop", ""), None, {}, flags=xeon - {"amx_int8", "amx_tile", "amx_bf16"})
    assert laptop.cmake_args == ("-DGGML_RPC=on",)
    assert cpu_flags("processor\t: 0\nFeatures\t: fp asimd\n") == frozenset()  # Arm says Features, builds natively


def test_the_installed_llama_cpp_has_no_amx_buffer():
    """What install.py built on this machine: natively where the CPU lacks AMX (no AMX code then either), and
    without it where the CPU has it; the bundled model loads in test_engine either way."""
    import llama_cpp

    installed = installed_backends(Path(llama_cpp.__file__).parent / "lib")
    assert installed is not None and "cpu" in installed and "amx" not in installed


def test_the_install_makes_workbench_a_command_the_shell_finds(tmp_path):
    sys.path.insert(0, str(REPO))
    try:
        import install  # the top-level script, importable for its functions
    finally:
        sys.path.remove(str(REPO))
    # pyenv: its shims find a new command only after `pyenv rehash`, which the install runs (a stand-in pyenv
    # here, laid out as pyenv is: libexec/pyenv, versions/<v>/bin, shims)
    root = tmp_path / ".pyenv"
    scripts = root / "versions" / "3.11.7" / "bin"
    scripts.mkdir(parents=True)
    (scripts / "workbench").write_text("#!/bin/sh\n")
    pyenv = root / "libexec" / "pyenv"
    pyenv.parent.mkdir()
    pyenv.write_text(f'#!/bin/sh\n[ "$1" = rehash ] && mkdir -p {root}/shims && touch {root}/shims/workbench\n')
    pyenv.chmod(0o755)
    lines, commands = install.launcher_plan(f"{scripts}:/usr/bin", scripts, str(pyenv))
    assert [argv for _, argv in commands] == [[str(pyenv), "rehash"]] and "pyenv rehash" in lines[0]
    for env, argv in commands:
        subprocess.run(argv, env=env, check=True, timeout=30)
    assert (root / "shims" / "workbench").is_file()
    # a plain interpreter whose scripts folder is on PATH: nothing to do
    plain = tmp_path / "venv" / "bin"
    plain.mkdir(parents=True)
    lines, commands = install.launcher_plan(f"/usr/bin:{plain}", plain, None)
    assert commands == [] and "on PATH" in lines[0]
    # not on PATH and no pyenv: the folder to add, and the module form
    lines, commands = install.launcher_plan("/usr/bin", plain, str(pyenv))
    assert commands == [] and f'export PATH="{plain}:$PATH"' in lines[0] and "python -m workbench" in lines[0]
