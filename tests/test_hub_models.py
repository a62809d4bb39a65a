"""`workbench models` and list_models: bundled, HF-cache and local models; partial downloads are never models."""

from __future__ import annotations

import json

import pytest
from gguf_factory import write_tiny_gguf
from hubserver import Fault, hub, hub_cache  # noqa: F401 - hub is a fixture

from workbench.cli.main import main
from workbench.core.errors import HubError, WorkbenchError
from workbench.core.hub.cache import BUNDLED, CACHED, LOCAL, list_models, partial_downloads
from workbench.core.hub.download import download_model
from workbench.core.paths import bundled_model_path


def test_bundled_cached_and_local_models_are_listed_with_their_kind(hub, tmp_path):
    tiny = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    hub.add_repo("test-org/Tiny-GGUF", {tiny.name: tiny})
    downloaded = download_model("test-org/Tiny-GGUF", tiny.name).path

    local = tmp_path / "my-models"
    (local / "sub").mkdir(parents=True)
    write_tiny_gguf(local / "sub" / "mine-Q8_0.gguf")
    write_tiny_gguf(local / "lonely-Q4_0-00001-of-00002.gguf")  # its second part is missing: not loadable
    (local / "notes.txt").write_text("not a model")

    models = list_models((local,))
    assert [m.kind for m in models] == [BUNDLED, CACHED, LOCAL]
    bundled, cached, mine = models
    assert bundled.path == bundled_model_path() and bundled.quant == "Q4_1"
    assert (cached.repo, cached.name, cached.path, cached.quant) == ("test-org/Tiny-GGUF", tiny.name, downloaded, "Q4_K_M")
    assert cached.size_bytes == tiny.stat().st_size and cached.revision == hub.repos["test-org/Tiny-GGUF"].commit
    assert mine.name == "sub/mine-Q8_0.gguf" and mine.quant == "Q8_0"


def test_an_interrupted_download_is_a_partial_not_a_model(hub, tmp_path, capsys):
    tiny = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    hub.add_repo("test-org/Tiny-GGUF", {tiny.name: tiny})
    hub.set_fault("test-org/Tiny-GGUF", tiny.name, Fault(cut_after=100_000, times=None))
    with pytest.raises(HubError):
        download_model("test-org/Tiny-GGUF", tiny.name, max_attempts=1)
    assert [m.kind for m in list_models()] == [BUNDLED]
    (partial,) = partial_downloads()
    assert partial.size_bytes == 100_000

    assert main(["models", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["kind"] for m in data["models"]] == [BUNDLED]
    assert data["partial_downloads"][0]["repo"] == "test-org/Tiny-GGUF"
    assert data["hub_cache"] == str(hub_cache(tmp_path))

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "Partial downloads (not usable yet; `workbench download` resumes them):" in out
    assert "test-org/Tiny-GGUF  100.0 kB so far" in out


def test_a_missing_local_folder_is_one_clear_line(hub, tmp_path, capsys):
    with pytest.raises(WorkbenchError, match="is not a folder"):
        list_models((tmp_path / "nowhere",))
    assert main(["models", "--dir", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"workbench: {tmp_path / 'nowhere'}: is not a folder. Give --dir a folder that holds .gguf files")


def test_cli_download_by_quant_prints_the_path_to_load(hub, tmp_path, capsys):
    tiny = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    hub.add_repo("test-org/Tiny-GGUF", {tiny.name: tiny})
    assert main(["download", "test-org/Tiny-GGUF", "--quant", "Q4_K_M"]) == 0
    captured = capsys.readouterr()
    path = captured.out.strip()
    assert path.endswith(f"/snapshots/{hub.repos['test-org/Tiny-GGUF'].commit}/{tiny.name}")
    assert "verified: LFS sha256" in captured.err and "100.0%" in captured.err

    assert main(["download", "test-org/Tiny-GGUF", tiny.name, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["already_cached"] and result["fetched_bytes"] == 0 and result["path"] == path

    assert main(["download", "test-org/Tiny-GGUF", tiny.name, "--quant", "Q4_K_M"]) == 2
    assert "give one of FILE, --quant or REPO:QUANT" in capsys.readouterr().err


def test_cli_download_refuses_a_model_that_does_not_fit_the_device(hub, tmp_path, capsys):
    from workbench.core.config.devices import list_devices

    tiny = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    hub.add_repo("test-org/Tiny-GGUF", {tiny.name: tiny})
    devices = tmp_path / "wb-config" / "devices"
    devices.mkdir(parents=True)
    (devices / "pocket-board.toml").write_text(
        'name = "pocket-board"\nram_total_mb = 512\nmem_bandwidth_gbs = 4.0\ncores = 1\n\n[reserves_mb]\nos = 480\n')
    assert "pocket-board" in [d.name for d in list_devices()]

    assert main(["download", "test-org/Tiny-GGUF", tiny.name, "--device", "pocket-board"]) == 2
    captured = capsys.readouterr()
    assert "fit check (as-is on pocket-board): does not fit; no context fits" in captured.err
    assert f"workbench: {tiny.name} does not fit pocket-board with preset as-is" in captured.err
    assert "--anyway" in captured.err
    assert hub.file_requests("GET") and all(r.range for r in hub.file_requests("GET"))  # header ranges only
    assert [m.kind for m in list_models()] == [BUNDLED]

    assert main(["download", "test-org/Tiny-GGUF", tiny.name, "--device", "pocket-board", "--anyway"]) == 0
    assert capsys.readouterr().out.strip().endswith(tiny.name)


def test_broken_gguf_files_are_not_listed_as_usable_models(hub, tmp_path, capsys):
    folder = tmp_path / "field-models"
    folder.mkdir()
    good = write_tiny_gguf(folder / "good-Q8_0.gguf")
    (folder / "error-page-Q4_K_M.gguf").write_text("<html><body>404 Not Found</body></html>")
    (folder / "empty-Q4_0.gguf").write_bytes(b"")
    (folder / "cut-Q4_0.gguf").write_bytes(good.read_bytes()[: good.stat().st_size // 2])

    assert main(["models", "--dir", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in data["models"] if m["kind"] == LOCAL] == ["good-Q8_0.gguf"]
    problems = {m["name"]: m["problem"] for m in data["unusable"]}
    assert set(problems) == {"error-page-Q4_K_M.gguf", "empty-Q4_0.gguf", "cut-Q4_0.gguf"}
    assert "HTML" in problems["error-page-Q4_K_M.gguf"]
    assert "empty" in problems["empty-Q4_0.gguf"]

    assert main(["models", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    usable, _, unusable = out.partition("Not usable")
    assert "good-Q8_0.gguf" in usable and "cut-Q4_0.gguf" not in usable
    assert f"{folder / 'cut-Q4_0.gguf'}: " in unusable


def test_a_dir_holding_the_hf_cache_lists_each_download_once(hub, tmp_path, capsys):
    tiny = write_tiny_gguf(tmp_path / "tiny-Q4_K_M.gguf")
    hub.add_repo("test-org/Tiny-GGUF", {tiny.name: tiny})
    download_model("test-org/Tiny-GGUF", tiny.name)

    models = list_models((hub_cache(tmp_path).parent,))
    assert [m.kind for m in models] == [BUNDLED, CACHED]


def test_models_table_puts_the_path_under_its_row_on_an_80_column_terminal(hub, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("workbench.cli.text_table.terminal_width", lambda: 80)
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["KIND", "REPOSITORY", "FILE", "QUANT", "SIZE"]
    assert lines[1].startswith("bundled") and lines[2] == f"    {bundled_model_path()}"  # whole, so it can be copied
    assert lines[-1] == f"HF cache: {hub_cache(tmp_path)}"  # whole too, however long tmp_path is
    paths = (str(bundled_model_path()), str(hub_cache(tmp_path)))
    assert all(len(line) <= 80 for line in lines if not any(path in line for path in paths)), lines
