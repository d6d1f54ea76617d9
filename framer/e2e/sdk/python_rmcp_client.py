"""The official Python SDK's client against the rmcp example server
(framer/e2e/src/bin/rmcp_server.rs, `#[tool]` on mcp_framer_rmcp::stdio()).

    python python_rmcp_client.py <rmcp_server executable> [args...]

Each step under a deadline: initialize, tools/list (large, run, slow), a
4 MiB result, a slow call with progress notifications, a subprocess call, a
call given up on (the SDK's request timeout) followed by a call that
completes, ping. One JSON line per step and a summary; exit 1 if any step
failed.
"""

import json
import sys

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

# The step runner, its deadline and the text helper: the same as the
# lib_server client's (this file's folder is on sys.path).
from python_client import record, results, step, text_of


async def run(command, args):
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:

            async def initialize():
                init = await session.initialize()
                return init.capabilities.tools is not None, {"protocol": init.protocol_version,
                                                             "server": init.server_info.name}

            async def list_tools():
                names = sorted(t.name for t in (await session.list_tools()).tools)
                return names == ["large", "run", "slow"], {"tools": names}

            async def large_result():
                result = await session.call_tool("large", {"bytes": 4 << 20})
                size = len(text_of(result).encode())
                return size == 4 << 20 and not result.is_error, {"bytes": size}

            async def progress():
                seen = []

                async def on_progress(progress, total, message):
                    seen.append(progress)

                result = await session.call_tool("slow", {"seconds": 1}, progress_callback=on_progress)
                return (not result.is_error) and len(seen) >= 5, {"progress_notifications": len(seen)}

            async def subprocess():
                result = await session.call_tool("run", {"script": "echo from-a-child"})
                return "from-a-child" in text_of(result) and not result.is_error, {"text": text_of(result)[:80]}

            async def give_up_then_call():
                try:
                    await session.call_tool("slow", {"seconds": 60}, read_timeout_seconds=0.5)
                    return False, {"error": "the slow call returned"}
                except MCPError as e:
                    timeout_error = str(e)[:60]
                result = await session.call_tool("large", {"bytes": 5})
                return text_of(result) == "xxxxx", {"timeout_error": timeout_error}

            async def ping():
                await session.send_ping()
                return True, {}

            for name, fn in [
                ("initialize", initialize),
                ("tools/list", list_tools),
                ("4 MiB result", large_result),
                ("slow call with progress", progress),
                ("subprocess call", subprocess),
                ("give up, then call", give_up_then_call),
                ("ping", ping),
            ]:
                await step(name, fn)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)

    async def guarded():
        with anyio.fail_after(120):
            await run(sys.argv[1], sys.argv[2:])

    try:
        anyio.run(guarded)
    except Exception as e:  # noqa: BLE001
        record("session", False, error=f"{type(e).__name__}: {e}")
    failed = [r["step"] for r in results if not r["ok"]]
    print(json.dumps({"client": "python", "server": "rmcp", "steps": len(results), "failed": failed}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
