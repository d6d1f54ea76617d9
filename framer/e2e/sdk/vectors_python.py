"""Runs conformance vectors against the Python SDK's (`mcp` on PyPI) own
stdio readers, under the runner contract of corpus/vectors/README.md.

    vectors_python.py server    # mcp.server.stdio.stdio_server(), reading its real fd 0
    vectors_python.py client    # mcp.client.stdio.stdio_client(), reading a real child's stdout

Cases come on stdin (one JSON object a line, all read before the first
runs, since the server case takes fd 0 over); events go to stdout.

server: for each case, fd 0 becomes the read end of a new pipe, fed read by
read from a thread (vectors_feed.py), and the SDK's stdio_server() claims
it and wraps it itself (TextIOWrapper, UTF-8, errors="replace", universal
newlines); the runner reads the session streams it yields until they end.
client: stdio_client() spawns vectors_feed.py, which writes the vector to
its stdout after the runner's first message; the runner reads the session
streams until they end.

What is a frame: both readers hand each line to
`mcp_types.jsonrpc_message_adapter.validate_json(line)`. The runner wraps
that adapter object (the SDK looks it up at every call) to record the line
handed over, then calls the real one; the session stream then yields the
message or the exception, which gives the frame's outcome. The server's
lines keep the "\\n" their text layer gives them (JSON whitespace); the
frame reported is the line without it, and `terminated: false` marks a last
line that had none.
"""

import importlib.metadata
import json
import os
import sys
import time

import anyio
import mcp_types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vectors_feed  # noqa: E402

CASE_DEADLINE = 120.0
FEEDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors_feed.py")


class Recorder:
    """Stands in for mcp_types.jsonrpc_message_adapter: records each line
    handed to it, with the time, then validates it with the real adapter."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.lines = []

    def validate_json(self, line, *args, **kwargs):
        self.lines.append((line, time.monotonic()))
        return self.adapter.validate_json(line, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.adapter, name)


RECORDER = Recorder(mcp_types.jsonrpc_message_adapter)
mcp_types.jsonrpc_message_adapter = RECORDER


def frame_events(items, strip_newline):
    """One frame event per recorded line, with the outcome the session stream
    gave it (the streams yield exactly one item per line, in order)."""
    events = []
    for i, (line, _at) in enumerate(RECORDER.lines):
        terminated = True
        if strip_newline:
            terminated = line.endswith("\n")
            line = line[:-1] if terminated else line
        event = {"type": "frame", "hex": line.encode("utf-8", "surrogatepass").hex()}
        if not terminated:
            event["terminated"] = False
        if i < len(items):
            item = items[i]
            if isinstance(item, Exception):
                event["outcome"] = "rejected"
                event["detail"] = f"{type(item).__name__} delivered to the session"
            else:
                event["outcome"] = "message"
        events.append(event)
    return events


def leaf_exceptions(exc):
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaf_exceptions(inner)]
    return [exc]


async def server_case(vector_path):
    data, chunks = vectors_feed.load(vector_path)
    started = time.monotonic()
    read_fd, thread, abort = vectors_feed.feed_in_thread(data, chunks)
    os.dup2(read_fd, 0)
    os.close(read_fd)
    items, state = [], "eof"
    try:
        async with stdio_server() as (read_stream, write_stream):
            with anyio.move_on_after(CASE_DEADLINE) as scope:
                async for item in read_stream:
                    items.append(item)
            await write_stream.aclose()
            if scope.cancelled_caught:
                state = "timeout"
                abort.set()
    finally:
        abort.set()
        thread.join()
    return items, state, started, None


async def client_case(vector_path):
    params = StdioServerParameters(command=sys.executable, args=[FEEDER, vector_path, "--go"])
    items, state, crash = [], "eof", None
    started = time.monotonic()
    try:
        async with stdio_client(params, errlog=sys.stderr) as (read_stream, write_stream):
            started = time.monotonic()
            await write_stream.send(SessionMessage(mcp_types.JSONRPCNotification(jsonrpc="2.0", method="go")))
            with anyio.move_on_after(CASE_DEADLINE) as scope:
                async for item in read_stream:
                    items.append(item)
            if scope.cancelled_caught:
                state = "timeout"
    except Exception as exc:  # the reader task's failure ends the whole client
        state = "crashed"
        crash = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaf_exceptions(exc))
    return items, state, started, crash


def main():
    side = sys.argv[1] if len(sys.argv) > 1 else ""
    if side not in ("server", "client"):
        sys.exit("usage: vectors_python.py server|client < cases (JSON lines)")
    cases = [json.loads(line) for line in sys.stdin if line.strip()]
    out = os.fdopen(os.dup(1), "w", buffering=1)  # stdio_server() diverts fd 1 while it serves

    def emit(event):
        out.write(json.dumps(event) + "\n")

    versions = {name: importlib.metadata.version(name) for name in ("mcp", "mcp-types", "anyio", "pydantic")}
    reader = "stdio_server()" if side == "server" else "stdio_client()"
    emit({"type": "hello", "reader": f"python mcp {versions['mcp']} {reader}", "versions": versions,
          "limit": {"default": None, "configurable": False,
                    "counts": "nothing: there is none, a line is buffered whole whatever its size"}})
    for case in cases:
        RECORDER.lines = []
        run = server_case if side == "server" else client_case
        items, state, started, crash = anyio.run(run, case["vector"])
        for event in frame_events(items, strip_newline=side == "server"):
            emit({"case": case["case"], **event})
        end = {"case": case["case"], "type": "end", "state": state,
               "seconds": RECORDER.lines[-1][1] - started if RECORDER.lines else None}
        if crash:
            end["crash"] = crash
        emit(end)


if __name__ == "__main__":
    main()
