"""The pure domain: no Textual, no Rich, nothing at import time."""
