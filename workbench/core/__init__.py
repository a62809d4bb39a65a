"""The pure domain: no Textual, no Rich, nothing at import time.

Packages named for the parts, lowest first; a package imports only those above it in this list
(tests/test_layers.py checks it, function bodies included):

- `errors`, `paths`, `units`: the user-facing error, where files live, how figures are written.
- `files/`: safe opening of user paths (regular files only, names joined inside their roots,
  what the user typed for a model).
- `gguf/`: the GGUF header reader, its checks against the tensor table, ggml types, model facts.
- `config/`: presets, device profiles, TOML checks, host detection, chat mode, RPC endpoints.
- `ledger/`: memory prediction (weights, KV layers, compute replay, overhead), fixes, the
  per-device split and its decode bound, the KV grid.
- `hub/`, `rpc/`, `telemetry/`: getting models; llama.cpp's RPC backend; samplers of the machine.
- `fit/`: the fit search, the preset that fits a device and loses the least quality (`workbench fit`).
- `engine/`: the engine process running llama.cpp, its client, quantization, measurement ops.
- `serve/`, `tasks/`: the OpenAI-compatible API on the engine; evaluation tasks.
- `bench/`: sweeps that measure speed, memory, energy, heat and quality side by side.
"""
