// A small server written with the official TypeScript SDK
// (`@modelcontextprotocol/sdk`), for scripts/sdk-clients: `mcp-probe` checks
// it with `--large 'dump {...}'` and `--slow 'count {...}'`.
//
//     node node_server.mjs   (with the SDK and zod resolvable next to it)

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";
const server = new McpServer({ name: "node-probe-target", version: "0.0.1" });
server.tool("dump", { bytes: z.number() }, async ({ bytes }) => ({ content: [{ type: "text", text: "x".repeat(bytes) }] }));
server.tool("count", { seconds: z.number() }, async ({ seconds }, extra) => {
  const token = extra._meta?.progressToken;
  for (let i = 0; i < seconds * 10; i++) {
    if (extra.signal.aborted) throw new Error("cancelled");
    if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: i } });
    await new Promise((r) => setTimeout(r, 100));
  }
  return { content: [{ type: "text", text: "done" }] };
});
await server.connect(new StdioServerTransport());
