"""llama.cpp's RPC backend: node endpoints, the wire protocol, the library binding and the node server."""
