"""A small server written with the official Python SDK (`mcp`), for
scripts/sdk-clients: `mcp-probe` checks it with `--large 'dump {...}'` and
`--slow 'count {...}'`.

    python python_server.py
"""

import anyio
from mcp.server.mcpserver import MCPServer as FastMCP, Context

mcp = FastMCP("py-probe-target")

@mcp.tool()
def dump(bytes: int = 1_000_000) -> str:
    """Return `bytes` bytes of text."""
    return "x" * bytes

@mcp.tool()
async def count(seconds: float = 10.0, ctx: Context = None) -> str:
    """Count for `seconds`, reporting progress every 100 ms."""
    steps = int(seconds * 10)
    for i in range(steps):
        await ctx.report_progress(i, steps)
        await anyio.sleep(0.1)
    return f"counted {steps}"

if __name__ == "__main__":
    mcp.run()
