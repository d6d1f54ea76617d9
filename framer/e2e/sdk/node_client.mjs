// The official TypeScript SDK's client against a server built on
// mcp-framer-stdio: v1 (`@modelcontextprotocol/sdk`) by default, or v2
// (`@modelcontextprotocol/client`) with its version negotiation.
//
//     node node_client.mjs <server executable> [args...]            # v1
//     node node_client.mjs --v2 auto <server executable> [args...]  # v2, server/discover then initialize
//     node node_client.mjs --v2 2026-07-28 <server> [args...]       # v2 pinned to the modern era
//
// (with the SDK resolvable: NODE_PATH or a node_modules next to it). The same steps as python_client.py, each under a deadline:
// initialize, tools/list, a plain call, a structured call the SDK validates
// against its outputSchema, a tool failure as an `isError` result, invalid
// arguments as JSON-RPC -32602, a 4 MiB result, a call given up on (the
// SDK's request timeout, which sends notifications/cancelled) followed by a
// call that completes at once, and ping. One JSON line per step, then a
// summary; exit code 1 if any step failed.

const argv = process.argv.slice(2);
// `--v2 auto` or `--v2 <pinned version>`: the v2 client and its negotiation mode.
const v2 = argv[0] === "--v2" ? argv[1] : undefined;
const serverArgs = v2 ? argv.slice(2) : argv;
const label = v2 ? `node-v2-${v2}` : "node";
const { Client } = await import(v2 ? "@modelcontextprotocol/client" : "@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await import(
  v2 ? "@modelcontextprotocol/client/stdio" : "@modelcontextprotocol/sdk/client/stdio.js"
);
// v1 throws McpError for a JSON-RPC error, v2 ProtocolError.
const RpcError = v2
  ? (await import("@modelcontextprotocol/client")).ProtocolError
  : (await import("@modelcontextprotocol/sdk/types.js")).McpError;

const STEP_DEADLINE_MS = 10_000;
const results = [];

function record(step, ok, detail = {}) {
  results.push({ client: label, step, ok: Boolean(ok), ...detail });
  console.log(JSON.stringify(results.at(-1)));
}

async function step(name, fn) {
  const started = performance.now();
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`deadline of ${STEP_DEADLINE_MS} ms`)), STEP_DEADLINE_MS);
  });
  try {
    const [ok, detail] = await Promise.race([fn(), deadline]);
    record(name, ok, { ms: Math.round((performance.now() - started) * 10) / 10, ...detail });
  } catch (e) {
    record(name, false, { error: String(e) });
  } finally {
    clearTimeout(timer);
  }
}

const textOf = (result) => result.content.filter((b) => b.type === "text").map((b) => b.text).join("");

async function main() {
  const [command, ...args] = serverArgs;
  if (!command) {
    console.error("usage: node node_client.mjs [--v2 auto|VERSION] <server executable> [args...]");
    process.exit(2);
  }
  const transport = new StdioClientTransport({ command, args, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (chunk) => (stderr += chunk));
  const negotiation = v2 ? { versionNegotiation: { mode: v2 === "auto" ? "auto" : { pin: v2 } } } : {};
  const client = new Client({ name: "mcp-framer-interop", version: "1.0.0" }, negotiation);
  const timeoutOption = (ms) => ({ timeout: ms });

  await step(v2 ? "connect (negotiated)" : "initialize", async () => {
    await client.connect(transport);
    const server = client.getServerVersion();
    const detail = { server: server?.name };
    if (v2) {
      detail.era = client.getProtocolEra?.();
      detail.protocol = client.getNegotiatedProtocolVersion?.();
    }
    // Pinned, the era must be modern at exactly that version.
    const pinned = !v2 || v2 === "auto" || (detail.era === "modern" && detail.protocol === v2);
    return [server?.name === "lib-server" && pinned, detail];
  });
  await step("tools/list", async () => {
    const { tools } = await client.listTools();
    const names = new Set(tools.map((t) => t.name));
    const schemas = tools.filter((t) => t.outputSchema).map((t) => t.name).sort();
    const ok = ["echo", "search", "slow", "big"].every((n) => names.has(n)) && schemas.includes("search");
    return [ok, { tools: tools.length, with_output_schema: schemas }];
  });
  await step("call echo", async () => {
    const text = 'héllo "wörld" 🦀';
    const result = await client.callTool({ name: "echo", arguments: { text } });
    return [textOf(result) === text && !result.isError, {}];
  });
  await step("structured result", async () => {
    // The client validates structuredContent against the tool's
    // outputSchema (listTools above cached it) and throws if it fails.
    const result = await client.callTool({ name: "search", arguments: { count: 30, page_items: 10 } });
    const sc = result.structuredContent ?? {};
    return [!result.isError && Object.keys(sc).length > 0, { keys: Object.keys(sc).sort() }];
  });
  await step("tool failure is isError", async () => {
    const result = await client.callTool({ name: "fail", arguments: {} });
    return [result.isError === true, { text: textOf(result).slice(0, 80) }];
  });
  await step("invalid arguments are -32602", async () => {
    try {
      await client.callTool({ name: "bad_args", arguments: {} });
    } catch (e) {
      return [e instanceof RpcError && e.code === -32602, { code: e.code }];
    }
    return [false, { error: "no JSON-RPC error" }];
  });
  await step("4 MiB result", async () => {
    const result = await client.callTool({ name: "big", arguments: { bytes: 4 << 20 } });
    const bytes = Buffer.byteLength(textOf(result));
    return [bytes >= 4 << 20, { bytes }];
  });
  await step("give up, then call", async () => {
    let started = performance.now();
    let timeoutError;
    try {
      // v1: (params, resultSchema, options); v2: (params, options).
      const call = { name: "slow", arguments: { ms: 60000 } };
      await (v2 ? client.callTool(call, timeoutOption(500)) : client.callTool(call, undefined, timeoutOption(500)));
      return [false, { error: "the slow call returned" }];
    } catch (e) {
      timeoutError = String(e).slice(0, 60);
    }
    const gaveUp = Math.round(performance.now() - started);
    started = performance.now();
    const result = await client.callTool({ name: "echo", arguments: { text: "after" } });
    const after = Math.round((performance.now() - started) * 10) / 10;
    return [textOf(result) === "after" && after < 1000, { gave_up_ms: gaveUp, next_call_ms: after, timeout_error: timeoutError }];
  });
  // The 2026-07-28 revision removed ping; the legacy era still has it.
  if (!v2 || client.getProtocolEra?.() !== "modern") {
    await step("ping", async () => {
      await client.ping();
      return [true, {}];
    });
  }
  await step("close", async () => {
    await client.close();
    // The server prints its report when stdin closes; give it a moment.
    for (let i = 0; i < 100 && !stderr.includes("report: "); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    return [true, {}];
  });
  const line = stderr.split("\n").filter((l) => l.startsWith("report: ")).at(-1);
  if (line) {
    const cancels = JSON.parse(line.slice("report: ".length)).cancels ?? {};
    record("server saw the cancellation", (cancels.running ?? 0) + (cancels.queued ?? 0) >= 1, { cancels });
  } else {
    record("server report", false, { error: "no report line on the server's stderr" });
  }
  const failed = results.filter((r) => !r.ok).map((r) => r.step);
  console.log(JSON.stringify({ client: label, steps: results.length, failed }));
  process.exit(failed.length ? 1 : 0);
}

setTimeout(() => {
  console.error("node_client: the whole run passed 120 s");
  process.exit(1);
}, 120_000).unref();
main();
