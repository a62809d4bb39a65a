"""Edge LLM Workbench: make a language model run on an edge device."""

__version__ = "0.1.0"
