"""A peer for side-by-side measurement: the official Python SDK's MCPServer with an in-memory
key/value recall tool, the nearest equivalent of vox_memory_recall without a store.

mcp-bench --tool recall --args '{"key":"bench/k"}' --setup-tool store \
  --setup-args '{"key":"bench/k","value":"v"}' -- .venv/bin/python bench/peers/python_kv_server.py
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("python-kv")
memories: dict[str, str] = {}


@server.tool()
def store(key: str, value: str) -> dict:
    """Store a value under a key."""
    memories[key] = value
    return {"stored": True, "key": key}


@server.tool()
def recall(key: str) -> dict:
    """Recall the value stored under a key."""
    return {"found": key in memories, "value": memories.get(key)}


if __name__ == "__main__":
    server.run("stdio")
