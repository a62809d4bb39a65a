"""The memory panel's column group per device: predicted, llama.cpp's report, measured (a local node's process)."""

import dataclasses
import os

from fakes import MIB, panel_host, rendered

from workbench.core.ledger.split_types import DecodeBound, DeviceLedger, SplitLedger
from workbench.core.engine.events import DeviceBuffers, Loaded
from workbench.core.ledger.types import FITS, Ledger
from workbench.ui.panel_views import LedgerView


def _device(name, endpoint, weights, kv, compute, budget, verdict=FITS):
    return DeviceLedger(name=name, endpoint=endpoint, layers=(0,), holds_output=False, weights_bytes=weights * MIB,
                        kv_bytes=kv * MIB, compute_bytes=compute * MIB, overhead_bytes=0, budget_bytes=budget,
                        budget_source="t", verdict=verdict, reason="why")


def _split():
    bound = DecodeBound((), ())
    return SplitLedger(model="m", preset="p", ctx_size=1024, n_gpu_layers=-1, splits=(1.0,), splits_source="t",
                       devices=(_device("CPU", "", 29, 0, 3, 6192 * MIB),
                                _device("RPC0", "127.0.0.1:1", 92, 22, 49, None, verdict="unknown")),
                       verdict="unknown", reason="why", max_ctx=0, best_tensor_split=(), decode_empty=bound,
                       decode_full=bound)


def _ledger():
    return Ledger(model="m", preset="p", device="d", ctx_size=1024, cache_type_k="f16", cache_type_v="f16",
                  ram_total_bytes=8192 * MIB, reserves_bytes=(), budget_bytes=6192 * MIB, weights_bytes=121 * MIB,
                  kv_bytes=22 * MIB, compute_bytes=50 * MIB, overhead_bytes=60 * MIB, total_bytes=253 * MIB,
                  headroom_bytes=5939 * MIB, verdict=FITS, reason="why", kv_bytes_per_token=1, max_ctx_by_kv_type=(),
                  decode_tps_bound=(1.0, 1.0))


async def test_one_column_group_per_device_with_llama_cpp_beside_the_prediction():
    from workbench.ui.widgets.ledger_panel import LedgerPanel

    panel = LedgerPanel(classes="panel")
    async with panel_host(panel).run_test(size=(120, 50)) as pilot:
        panel.view = LedgerView(ledger=_ledger(), split=_split())
        await pilot.pause()
        text = rendered(panel)
        assert "per device" in text and "RPC0" in text and "pred" in text and "cpp" in text and "meas" in text
        assert "163" in text  # RPC0's predicted total: 92 + 22 + 49 MiB
        loaded = Loaded(model_path="/m", preset_name="p", n_ctx=1024, n_ctx_train=8192, model_buffer_bytes=0,
                        kv_buffer_bytes=0, compute_buffer_bytes=0, load_seconds=1, rss_bytes=300 * MIB,
                        uss_bytes=0, pid=os.getpid(),
                        devices=(DeviceBuffers("CPU", "", 30 * MIB, 0, 2 * MIB),
                                 DeviceBuffers("RPC0", "127.0.0.1:1", 93 * MIB, 22 * MIB, 48 * MIB)))
        panel.view = dataclasses.replace(panel.view, loaded=loaded)
        await pilot.pause()
        text = rendered(panel)
        assert "93.0" in text and "48.0" in text  # llama.cpp's figures for the node
        assert "unknown" in text  # a node without a budget says so, not 0
