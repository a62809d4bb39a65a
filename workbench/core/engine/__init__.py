"""The engine: a process of its own that runs llama.cpp, and the client that drives it."""
