"""The KV panel of a hybrid model says which layers keep the cache and which a recurrent state instead."""

from __future__ import annotations

import dataclasses

from arch_recurrent import RECURRENT_MODELS, write_recurrent_gguf
from fakes import panel_host, rendered

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger
from workbench.ui.kv_view import KvView
from workbench.ui.widgets.kv_panel import KvPanel

DEVICE = DeviceProfile(name="roomy", ram_total_mb=65536, cores=2)


async def test_kv_panel_names_the_attention_and_the_recurrent_layers(tmp_path):
    path = write_recurrent_gguf(tmp_path / "lfm2.gguf", RECURRENT_MODELS["lfm2"])
    ledger = predict_ledger(read_gguf(path), Preset("p", ctx_size=2048), DEVICE)
    view = KvView(n_ctx=2048, cells_used=100, segments=(("current", 100),)).with_ledger(ledger)
    plain = KvView(n_ctx=2048).with_ledger(dataclasses.replace(ledger, recurrent=None))  # an attention-only model
    assert plain.layers_note == ""
    panel = KvPanel(classes="panel")
    async with panel_host(panel).run_test(size=(120, 24)) as pilot:
        panel.show(view)
        await pilot.pause()
        text = " ".join(rendered(panel).split())  # the panel wraps its lines
    # lfm2's head_count_kv is (0, 0, 1, 0, 0, 1): layers 2 and 5 attend; 128 x (3 - 1) x 4 B x 4 layers = 4 KiB
    assert "attention layers 2, 5 keep this cache" in text
    assert "recurrent layers 0-1, 3-4 keep 4.0 KiB per sequence (LFM2 short-conv state)" in text
