// The official TypeScript SDK's client against the rmcp example server
// (framer/e2e/src/bin/rmcp_server.rs, `#[tool]` on mcp_framer_rmcp::stdio()).
//
//     node node_rmcp_client.mjs <rmcp_server executable> [args...]
//
// The same steps as python_rmcp_client.py, each under a deadline:
// initialize, tools/list, a 4 MiB result, a slow call with progress, a
// subprocess call, a call given up on (the SDK's timeout, which sends
// notifications/cancelled) followed by a call that completes, ping, close.
// One JSON line per step, then a summary; exit code 1 if any step failed.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const STEP_DEADLINE_MS = 10_000;
const results = [];

function record(step, ok, detail = {}) {
  results.push({ client: "node", server: "rmcp", step, ok: Boolean(ok), ...detail });
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
  const [command, ...args] = process.argv.slice(2);
  if (!command) {
    console.error("usage: node node_rmcp_client.mjs <rmcp_server executable> [args...]");
    process.exit(2);
  }
  const transport = new StdioClientTransport({ command, args, stderr: "pipe" });
  const client = new Client({ name: "mcp-framer-interop", version: "1.0.0" });

  await step("initialize", async () => {
    await client.connect(transport);
    return [client.getServerCapabilities()?.tools !== undefined, { server: client.getServerVersion()?.name }];
  });
  await step("tools/list", async () => {
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    return [names.join(",") === "large,run,slow", { tools: names }];
  });
  await step("4 MiB result", async () => {
    const result = await client.callTool({ name: "large", arguments: { bytes: 4 << 20 } });
    const bytes = Buffer.byteLength(textOf(result));
    return [bytes === 4 << 20 && !result.isError, { bytes }];
  });
  await step("slow call with progress", async () => {
    let seen = 0;
    const result = await client.callTool({ name: "slow", arguments: { seconds: 1 } }, undefined, {
      onprogress: () => (seen += 1),
    });
    return [!result.isError && seen >= 5, { progress_notifications: seen }];
  });
  await step("subprocess call", async () => {
    const result = await client.callTool({ name: "run", arguments: { script: "echo from-a-child" } });
    return [textOf(result).includes("from-a-child") && !result.isError, { text: textOf(result).slice(0, 80) }];
  });
  await step("give up, then call", async () => {
    let timeoutError;
    try {
      await client.callTool({ name: "slow", arguments: { seconds: 60 } }, undefined, { timeout: 500 });
      return [false, { error: "the slow call returned" }];
    } catch (e) {
      timeoutError = String(e).slice(0, 60);
    }
    const result = await client.callTool({ name: "large", arguments: { bytes: 5 } });
    return [textOf(result) === "xxxxx", { timeout_error: timeoutError }];
  });
  await step("ping", async () => {
    await client.ping();
    return [true, {}];
  });
  await step("close", async () => {
    await client.close();
    return [true, {}];
  });
  const failed = results.filter((r) => !r.ok).map((r) => r.step);
  console.log(JSON.stringify({ client: "node", server: "rmcp", steps: results.length, failed }));
  process.exit(failed.length ? 1 : 0);
}

setTimeout(() => {
  console.error("node_rmcp_client: the whole run passed 120 s");
  process.exit(1);
}, 120_000).unref();
main();
