"""The GGUF header reader, its checks against the tensor table, ggml types and the model facts read from a file."""
