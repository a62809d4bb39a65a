"""Memory prediction: weights, KV cache, compute buffer and overhead, per device, with the fixes that make a preset fit."""
