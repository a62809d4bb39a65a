"""The OpenAI-compatible API server (`workbench api`): an ASGI app that is a client of the engine."""
