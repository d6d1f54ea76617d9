// A small server written with the official TypeScript SDK v2
// (`@modelcontextprotocol/server`), serving both protocol eras through
// `serveStdio`, for scripts/sdk-clients: `mcp-probe` checks it with
// `--large 'dump {...}'` and `--slow 'count {...}'`.
//
//     node node_server_v2.mjs   (with the SDK and zod resolvable next to it)

import { McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { z } from "zod";

serveStdio(() => {
  const server = new McpServer({ name: "node-v2-probe-target", version: "0.0.1" }, { capabilities: { tools: {} } });
  server.registerTool("dump", { description: "Return `bytes` bytes of text", inputSchema: z.object({ bytes: z.number() }) },
    async ({ bytes }) => ({ content: [{ type: "text", text: "x".repeat(bytes) }] }));
  server.registerTool("count", { description: "Count for `seconds`, with progress every 100 ms", inputSchema: z.object({ seconds: z.number() }) },
    async ({ seconds }, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      for (let i = 0; i < seconds * 10; i++) {
        if (ctx.mcpReq.signal.aborted) throw new Error("cancelled");
        if (token !== undefined) await ctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken: token, progress: i } });
        await new Promise((r) => setTimeout(r, 100));
      }
      return { content: [{ type: "text", text: "done" }] };
    });
  return server;
});
