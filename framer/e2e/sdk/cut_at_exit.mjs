// The last frame cut at exit (mthines/lorekit PR #383, apify/mcpc PR #17):
// a plain Node stdio server (no SDK) that calls process.exit() when stdin
// ends. Node writes to a pipe asynchronously: what the pipe does not take at
// once waits in the process, and process.exit() drops it, so a large result
// still queued arrives cut at a multiple of the pipe's 64 KiB.
//
//   node cut_at_exit.mjs           # the defect: exit at stdin's end
//   node cut_at_exit.mjs --drain   # the fix: wait until stdout has drained
//
// Both eras' handshakes, tools/list and one tool, `dump` ({"bytes": N}: a
// text result of N bytes). mcp-probe's exit-flush check FAILs the first and
// PASSes the second.
import readline from "node:readline";

const drain = process.argv.includes("--drain");
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const tools = [{
  name: "dump",
  description: "Returns {bytes} bytes of text",
  inputSchema: { type: "object", properties: { bytes: { type: "integer" } } },
}];
const serverInfo = { name: "cut_at_exit", version: "1.0.0" };

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let request;
  try { request = JSON.parse(line); } catch { return send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }); }
  const { id, method, params } = request;
  if (id === undefined) return;
  const result = (result) => send({ jsonrpc: "2.0", id, result });
  switch (method) {
    case "initialize":
      return result({ protocolVersion: "2025-11-25", capabilities: { tools: {} }, serverInfo });
    case "ping":
      return result({});
    case "tools/list":
      return result({ tools });
    case "tools/call": {
      const text = "x".repeat(params?.arguments?.bytes ?? 4_000_000);
      return result({ content: [{ type: "text", text }] });
    }
    default:
      return send({ jsonrpc: "2.0", id, error: { code: -32601, message: `Method not found: ${method}` } });
  }
});

process.stdin.on("end", () => {
  if (drain) {
    // An empty write's callback runs once everything queued before it is written.
    process.stdout.write("", () => process.exit(0));
  } else {
    process.exit(0); // the defect: drops what stdout still holds
  }
});
