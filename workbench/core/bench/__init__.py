"""Bench: preset sweeps measuring speed, memory, energy, heat and quality side by side."""
