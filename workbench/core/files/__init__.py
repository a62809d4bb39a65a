"""Safe opening of user paths: regular files only, names joined inside their roots, model references."""
