"""The official Python SDK's client against a server built on mcp-framer-stdio.

    python python_client.py <server executable> [args...]

Spawns the server with the SDK's own stdio transport and checks, each step
under a deadline: initialize, tools/list (with an outputSchema), a plain
call, a structured call the SDK validates against its outputSchema, a tool
failure as an `isError` result, invalid arguments as JSON-RPC -32602, a
4 MiB result, a call the client gives up on (the SDK's request timeout)
followed by a call that completes at once, and ping. Prints one JSON line
per step and a summary; exits 1 if any step failed.
"""

import json
import sys
import time
from pathlib import Path
import tempfile

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

STEP_DEADLINE = 10.0
results = []


def record(step, ok, **detail):
    results.append({"client": "python", "step": step, "ok": bool(ok), **detail})
    print(json.dumps(results[-1]), flush=True)


async def step(name, coro_fn):
    started = time.monotonic()
    try:
        with anyio.fail_after(STEP_DEADLINE):
            ok, detail = await coro_fn()
    except Exception as e:  # noqa: BLE001: every failure is a recorded step
        ok, detail = False, {"error": f"{type(e).__name__}: {e}"}
    record(name, ok, ms=round((time.monotonic() - started) * 1000, 1), **detail)


def text_of(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def run(command, args, errlog):
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:

            async def initialize():
                init = await session.initialize()
                return init.server_info.name == "lib-server", {
                    "protocol": init.protocol_version,
                    "server": init.server_info.name,
                }

            async def list_tools():
                tools = (await session.list_tools()).tools
                names = {t.name for t in tools}
                schemas = sorted(t.name for t in tools if t.output_schema)
                return {"echo", "search", "slow", "big"} <= names and "search" in schemas, {
                    "tools": len(tools),
                    "with_output_schema": schemas,
                }

            async def echo():
                result = await session.call_tool("echo", {"text": "héllo \"wörld\" 🦀"})
                return text_of(result) == "héllo \"wörld\" 🦀" and not result.is_error, {}

            async def structured():
                # The SDK validates structuredContent against the tool's
                # outputSchema (it raises if it does not match).
                result = await session.call_tool("search", {"count": 30, "page_items": 10})
                sc = result.structured_content or {}
                return (not result.is_error) and isinstance(sc, dict) and sc != {}, {"keys": sorted(sc)}

            async def tool_failure():
                result = await session.call_tool("fail", {})
                return result.is_error is True, {"text": text_of(result)[:80]}

            async def invalid_arguments():
                try:
                    await session.call_tool("bad_args", {})
                except MCPError as e:
                    return e.error.code == -32602, {"code": e.error.code}
                return False, {"error": "no JSON-RPC error"}

            async def large_result():
                result = await session.call_tool("big", {"bytes": 4 << 20})
                return len(text_of(result).encode()) >= 4 << 20, {"bytes": len(text_of(result).encode())}

            async def give_up_then_call():
                started = time.monotonic()
                try:
                    await session.call_tool("slow", {"ms": 60000}, read_timeout_seconds=0.5)
                    return False, {"error": "the slow call returned"}
                except MCPError as e:
                    gave_up = round((time.monotonic() - started) * 1000, 1)
                    timeout_error = str(e)[:60]
                started = time.monotonic()
                result = await session.call_tool("echo", {"text": "after"})
                after = round((time.monotonic() - started) * 1000, 1)
                return text_of(result) == "after" and after < 1000, {
                    "gave_up_ms": gave_up,
                    "next_call_ms": after,
                    "timeout_error": timeout_error,
                }

            async def ping():
                await session.send_ping()
                return True, {}

            for name, fn in [
                ("initialize", initialize),
                ("tools/list", list_tools),
                ("call echo", echo),
                ("structured result", structured),
                ("tool failure is isError", tool_failure),
                ("invalid arguments are -32602", invalid_arguments),
                ("4 MiB result", large_result),
                ("give up, then call", give_up_then_call),
                ("ping", ping),
            ]:
                await step(name, fn)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        errpath = Path(tmp) / "stderr"
        with open(errpath, "w") as errlog:

            async def guarded():
                with anyio.fail_after(120):
                    await run(sys.argv[1], sys.argv[2:], errlog)

            try:
                anyio.run(guarded)
            except Exception as e:  # noqa: BLE001
                record("session", False, error=f"{type(e).__name__}: {e}")
        report = [l for l in errpath.read_text().splitlines() if l.startswith("report: ")]
        if report:
            cancels = json.loads(report[-1][len("report: "):]).get("cancels", {})
            record("server saw the cancellation", cancels.get("running", 0) + cancels.get("queued", 0) >= 1,
                   cancels=cancels)
        else:
            record("server report", False, error="no report line on the server's stderr")
    failed = [r["step"] for r in results if not r["ok"]]
    print(json.dumps({"client": "python", "steps": len(results), "failed": failed}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
