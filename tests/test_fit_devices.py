"""workbench fit over a hub repository's files (the test hub) and over RPC nodes; the ledger's placement fixes."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from cli_runner import run_cli
from hubserver import hub  # noqa: F401 - the fixture `served` takes

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.fit import options
from workbench.core.fit.options import fit_repo
from workbench.core.fit.types import FitRequest
from workbench.core.gguf.reader import read_gguf
from workbench.core.hub.files import GGUFFile, RemoteFile, RepoFiles
from workbench.core.ledger.predict import predicted_overhead_bytes
from workbench.core.paths import bundled_model_path

MIB = 1024 * 1024
REPO = "test-org/tiny-llama-GGUF"
BASE = Preset("base", ctx_size=2048, threads=1)
LLAMA = ARCH_MODELS["llama"]


@pytest.fixture(scope="module")
def repo_files(tmp_path_factory):
    """A small llama whose weights outweigh what a cache or ubatch change saves, as F16 and Q8_0, and a
    wider F16 one (its file alone is over the tight board's budget)."""
    folder = tmp_path_factory.mktemp("repo")
    small = replace(LLAMA, n_embd=512, n_head=8, n_ff=1536)
    return {
        "tiny-llama-F16.gguf": write_arch_gguf(folder / "f16.gguf", replace(small, weight_type="F16")),
        "tiny-llama-Q8_0.gguf": write_arch_gguf(folder / "q8.gguf", small),
        "wide-llama-F16.gguf": write_arch_gguf(folder / "wide.gguf", replace(small, n_layer=16, weight_type="F16")),
    }


@pytest.fixture
def served(request):
    """The test hub (hubserver's `hub` fixture), under a name that is not the imported one."""
    return request.getfixturevalue("hub")


def board(name: str, budget_bytes: int) -> DeviceProfile:
    return DeviceProfile(name=name, ram_total_mb=-(-budget_bytes // MIB), cores=2, mem_bandwidth_gbs=10)


def write_board(tmp_path, name: str, budget_mib: int, extra: str = "") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nram_total_mb = 1024\ncores = 2\nmem_bandwidth_gbs = 10\n{extra}\n'
                    f"[reserves_mb]\nos = {1024 - budget_mib}\n")
    return str(path)


def test_the_best_file_of_a_repository_that_fits(served, repo_files):
    served.add_repo(REPO, repo_files)
    f16 = read_gguf(repo_files["tiny-llama-F16.gguf"])
    # The F16 file's weights and the engine process alone are over this budget: no cache or ubatch saves it.
    tight = board("tight", f16.weights_bytes + predicted_overhead_bytes(f16) - MIB)
    result = fit_repo(REPO, tight, FitRequest(base=BASE, ctx_min=1024))
    assert result.fits and result.chosen.option.filename == "tiny-llama-Q8_0.gguf"
    # the wide file is larger than the budget: its header was never read
    assert not any("wide-llama" in request.path for request in served.file_requests())

    roomy = board("roomy", 2048 * MIB)
    best = fit_repo(REPO, roomy, FitRequest(base=BASE, ctx_min=1024))
    # F16 loses nothing (llama.cpp's table); the wide F16 file is also lossless but a different model: both
    # rank equal on quality, and the larger context (by doubling) or fewer changes decide among them
    assert best.chosen.option.weight_type == "F16"


def test_cli_fit_of_a_repository_and_nothing_fits(served, repo_files, tmp_path):
    served.add_repo(REPO, repo_files)
    q8 = read_gguf(repo_files["tiny-llama-Q8_0.gguf"])
    budget_mib = (q8.weights_bytes + predicted_overhead_bytes(q8)) // MIB + 40
    run = run_cli("fit", REPO, "--device", write_board(tmp_path, "b", budget_mib), "--ctx-min", "1024", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["fits"] and data["ledger"]["file"] in ("tiny-llama-Q8_0.gguf", "tiny-llama-F16.gguf")
    assert data["ledger"]["total_bytes"] <= data["ledger"]["budget_bytes"] == budget_mib * MIB
    small = run_cli("fit", REPO, "--device", write_board(tmp_path, "s", 20))
    assert small.returncode == 3 and "NOTHING FITS" in small.stdout


def test_rpc_node_with_a_profile_makes_it_fit(tmp_path):
    host = write_board(tmp_path, "host130", 130)
    node = write_board(tmp_path, "node300", 300)
    alone = run_cli("fit", "bundled", "--device", host, "--json")
    assert alone.returncode == 3 and json.loads(alone.stdout)["fits"] is False
    split = run_cli("fit", "bundled", "--device", host, "--rpc", f"127.0.0.1:1@{node}", "--quality", "q4", "--json")
    assert split.returncode == 0, split.stderr
    data = json.loads(split.stdout)
    assert data["preset"]["rpc"] == ["127.0.0.1:1"] and data["preset"]["gpu_layers"] in ("all", *range(1, 64))
    devices = data["ledger"]["devices"]
    assert [d["name"] for d in devices] == ["CPU", "RPC0"]
    assert all(d["total_bytes"] <= d["budget_bytes"] for d in devices)
    assert devices[1]["budget_bytes"] == 300 * MIB  # the node's profile
    assert data["ledger"]["split"]["verdict"] in ("fits", "tight")  # the whole model on the host alone does not
    assert {c["key"] for c in data["changes"]} >= {"gpu_layers", "rpc"}
    assert all(a["weight_type"] in ("Q4_1", "Q4_0") for a in data["alternatives"])  # --quality q4


def test_the_ledger_offers_gpu_layers_and_a_second_node(tmp_path):
    gpu_host = write_board(tmp_path, "gpu-host", 130, 'accelerator = "cuda"\nvram_mb = 600')
    run = run_cli("ledger", "bundled", "--preset", "as-is", "--device", gpu_host, "--ctx", "4096", "--json")
    fixes = json.loads(run.stdout)["fixes"]
    gpu = [f for f in fixes if f["change"].startswith("gpu_layers")]
    assert gpu and gpu[0]["fits"] and gpu[0]["saved_bytes"] > 0 and "CUDA0" in gpu[0]["change"]
    assert fixes[0] == gpu[0]  # a fix that costs no quality and fits comes first
    # the fix loads: the ledger of the preset with that many layers on the GPU fits every device
    preset = tmp_path / "offload.toml"
    layers = dict(gpu[0]["preset_changes"])["gpu_layers"]
    preset.write_text(f'name = "offload"\nctx_size = 4096\ngpu_layers = {json.dumps("all" if layers == -1 else layers)}\n')
    check = json.loads(run_cli("ledger", "bundled", "--preset", str(preset), "--device", gpu_host, "--json").stdout)
    assert check["split"]["verdict"] != "does not fit"

    host = write_board(tmp_path, "host130", 130)
    node = write_board(tmp_path, "node300", 300)
    run = run_cli("ledger", "bundled", "--preset", "as-is", "--device", host, "--ctx", "4096",
                  "--rpc", f"127.0.0.1:1@{node}", "--json")
    fixes = json.loads(run.stdout)["fixes"]
    assert any(f["change"].startswith("gpu_layers") and "RPC0 (127.0.0.1:1)" in f["change"] for f in fixes)
    unified = write_board(tmp_path, "unified", 130, 'accelerator = "cuda"')
    fixes = json.loads(run_cli("ledger", "bundled", "--preset", "as-is", "--device", unified, "--ctx", "4096",
                               "--json").stdout)["fixes"]
    assert not any(f["change"].startswith("gpu_layers") for f in fixes)  # unified memory: nothing to move


def test_fit_on_a_gpu_with_its_own_memory_offloads_the_layers(tmp_path):
    # 130 MiB of RAM cannot hold the bundled model (see test_rpc_node_with_a_profile_makes_it_fit); 600 MiB of VRAM can
    gpu_host = write_board(tmp_path, "gpu-host", 130, 'accelerator = "cuda"\nvram_mb = 600')
    run = run_cli("fit", "bundled", "--device", gpu_host, "--quality", "q4", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["preset"]["gpu_layers"] == "all" and "rpc" not in data["preset"]
    devices = data["ledger"]["devices"]
    assert [d["name"] for d in devices] == ["CPU", "CUDA0"] and devices[1]["budget_bytes"] == 600 * MIB
    assert all(d["total_bytes"] <= d["budget_bytes"] for d in devices)
    slower = write_board(tmp_path, "slow-gpu", 130, 'accelerator = "vulkan"\naccelerator_slower_than_cpu = true\n'
                         'vram_mb = 600')
    assert run_cli("fit", "bundled", "--device", slower, "--quality", "q4").returncode == 3  # its GPU is left out


def test_a_repository_of_many_files_costs_a_bounded_number_of_header_reads(monkeypatch):
    model = read_gguf(bundled_model_path())
    read = []

    def header(repo, name, **_):  # what a header read gives; counted instead of fetched
        read.append(name)
        return SimpleNamespace(model=model, header_quant="Q4_0", name_quant="Q4_0")

    monkeypatch.setattr(options, "read_remote_header", header)
    files = tuple(GGUFFile(f"m-{i:04d}-Q4_0.gguf", "Q4_0", (RemoteFile(f"m-{i:04d}-Q4_0.gguf", 1_000 + i, None),))
                  for i in range(500))
    found = options.repo_options(RepoFiles("a/b", "main", "0" * 40, False, files), 10**9)
    assert len(read) == len(found) == options.MAX_HEADERS == 32
    assert read[0] == "m-0499-Q4_0.gguf"  # the largest first: the least lossy of a type
