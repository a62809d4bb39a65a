"""Telemetry samplers: memory, temperatures, clocks, throttling, power — each from a named source."""
