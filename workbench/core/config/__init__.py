"""Presets, device profiles, TOML checks, host detection and RPC endpoint parsing."""
