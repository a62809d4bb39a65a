"""The engine's phases as the main screen sees them."""

IDLE, LOADING, LOADED, GENERATING, UNLOADING = "idle", "loading", "loaded", "generating", "unloading"
