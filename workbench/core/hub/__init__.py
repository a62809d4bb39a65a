"""Getting models: hub search, file lists, remote fit preview, resumable downloads, model listing."""
