// A stdio-v2 server written on Node's built-in `node:http2` (nghttp2
// underneath), no npm packages: a peer that is not ours, for our host
// (framer/e2e/tests/stdio_v2_node.rs) and for `mcp-probe --transport stdio-v2`.
//
//     node node_h2_server.mjs [SWITCHES]
//
// It serves MCP over HTTP/2 on its stdin (the client's bytes: prior knowledge,
// the preface first) and stdout. One endpoint, `POST /mcp`; each body is one
// JSON-RPC message. It checks the headers the 2026-07-28 Streamable HTTP text
// asks for (`mcp-method` equal to the body's method, `mcp-name` to
// `params.name`, `mcp-protocol-version` present) and answers a mismatch 400
// with -32020, unless `--no-header-checks`.
//
// Methods: `initialize`, `server/discover`, `ping`, `tools/list`,
// `tools/call`; notifications are answered 202. Tools:
//   echo  {text}            the text back, as one text block
//   big   {bytes}           a text block of `bytes` bytes of "x"
//   where {region, query}   `region` carries `x-mcp-header: Region`; says
//                           what the Mcp-Param-Region header said
//   broken {n}              an invalid `x-mcp-header` (on a number): a
//                           conforming client drops it from tools/list
//   slow  {count, ms}       `count` progress notifications `ms` apart on an
//                           event stream (when the call has a progressToken),
//                           then "slow done"; a reset stream stops it
//
// Misbehaviour switches (each alone or together):
//   --huge-header BYTES     every answer carries an `x-huge` header of BYTES
//   --no-window             never consume what it receives: its stream and
//                           connection windows are never given back (the
//                           session stalls once the host has sent 64 KiB)
//   --push                  tries a PUSH_PROMISE before each answer (refused
//                           by Node when the client disabled push: then it
//                           logs that and answers normally)
//   --cr-only               its event streams end lines with CR alone
//   --no-header-checks      checks no header at all: a body whose method the
//                           `mcp-method` header contradicts is served as the
//                           body says (what mcp-probe must call a FAIL)
//   --wrong-id              answers `tools/call` with another id
//
// stderr: `request METHOD headers {mcp-*} meta {_meta}` for each request,
// one line per other event worth knowing, and `node_h2_server: stopped`.
import http2 from "node:http2";
import { Duplex } from "node:stream";

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const value = (name) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : undefined;
};
const hugeHeader = value("--huge-header");
const noWindow = flag("--no-window");
const push = flag("--push");
const crOnly = flag("--cr-only");
const noHeaderChecks = flag("--no-header-checks");
const wrongId = flag("--wrong-id");
const log = (line) => process.stderr.write(`node_h2_server: ${line}\n`);

const tools = [
  { name: "echo", description: "Echo `text`", inputSchema: { type: "object", properties: { text: { type: "string" } } } },
  { name: "big", description: "`bytes` bytes of text", inputSchema: { type: "object", properties: { bytes: { type: "integer" } } } },
  { name: "where", description: "Says where it ran; `region` mirrored into Mcp-Param-Region", inputSchema: { type: "object", properties: { region: { type: "string", "x-mcp-header": "Region" }, query: { type: "string" } } } },
  { name: "broken", description: "An x-mcp-header on a number: clients must drop this tool", inputSchema: { type: "object", properties: { n: { type: "number", "x-mcp-header": "N" } } } },
  { name: "slow", description: "`count` progress events `ms` apart", inputSchema: { type: "object", properties: { count: { type: "integer" }, ms: { type: "integer" } } } },
];

const eol = crOnly ? "\r" : "\n";
const sse = (message) => `data: ${JSON.stringify(message)}${eol}${eol}`;
const extra = () => (hugeHeader ? { "x-huge": "h".repeat(hugeHeader) } : {});

function answerJson(stream, status, message) {
  if (stream.destroyed || stream.closed) return;
  const body = Buffer.from(JSON.stringify(message));
  stream.respond({ ":status": status, "content-type": "application/json", "content-length": body.length, ...extra() });
  stream.end(body);
}

const error = (id, code, message) => ({ jsonrpc: "2.0", id, error: { code, message } });
const result = (id, value) => ({ jsonrpc: "2.0", id: wrongId ? "not-" + String(id) : id, result: value });
const text = (t) => ({ content: [{ type: "text", text: t }] });

function checkHeaders(headers, message) {
  if (noHeaderChecks) return null;
  if (headers["mcp-method"] !== message.method) return `Header mismatch: mcp-method ${headers["mcp-method"]} is not ${message.method}`;
  if (!headers["mcp-protocol-version"]) return "Header mismatch: mcp-protocol-version is missing";
  const name = message.params?.name ?? message.params?.uri;
  if (["tools/call", "prompts/get", "resources/read"].includes(message.method)) {
    let header = headers["mcp-name"];
    const m = /^=\?base64\?(.*)\?=$/.exec(header ?? "");
    if (m) header = Buffer.from(m[1], "base64").toString("utf8");
    if (header !== name) return `Header mismatch: mcp-name ${headers["mcp-name"]} is not ${name}`;
  }
  return null;
}

async function serve(stream, headers, message) {
  const { id, method, params } = message;
  if (id === undefined) {
    stream.respond({ ":status": 202, ...extra() });
    stream.end();
    return;
  }
  const mcp = Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith("mcp-")));
  log(`request ${method} headers ${JSON.stringify(mcp)} meta ${JSON.stringify(params?._meta ?? null)}`);
  const problem = checkHeaders(headers, message);
  if (problem) return answerJson(stream, 400, error(id, -32020, problem));
  switch (method) {
    case "initialize":
      return answerJson(stream, 200, result(id, { protocolVersion: params?.protocolVersion ?? "2025-11-25", capabilities: { tools: {} }, serverInfo: { name: "node-h2-server", version: "0.0.1" } }));
    case "server/discover":
      return answerJson(stream, 200, result(id, { supportedVersions: ["2026-07-28", "2025-11-25"], capabilities: { tools: {} }, serverInfo: { name: "node-h2-server", version: "0.0.1" } }));
    case "ping":
      return answerJson(stream, 200, result(id, {}));
    case "tools/list":
      return answerJson(stream, 200, result(id, { tools }));
    case "tools/call":
      break;
    default:
      return answerJson(stream, 404, error(id, -32601, `Method not found: ${method}`));
  }
  const a = params?.arguments ?? {};
  switch (params?.name) {
    case "echo":
      return answerJson(stream, 200, result(id, text(String(a.text ?? ""))));
    case "where":
      return answerJson(stream, 200, result(id, text(`ran in ${a.region} (header ${headers["mcp-param-region"]})`)));
    case "big":
      return answerJson(stream, 200, result(id, text("x".repeat(Number(a.bytes ?? 0)))));
    case "slow": {
      const token = params?._meta?.progressToken;
      const count = Number(a.count ?? 5);
      const ms = Number(a.ms ?? 50);
      if (token === undefined) {
        await new Promise((r) => setTimeout(r, count * ms));
        return answerJson(stream, 200, result(id, text("slow done")));
      }
      stream.respond({ ":status": 200, "content-type": "text/event-stream", ...extra() });
      for (let i = 1; i <= count; i++) {
        if (stream.destroyed || stream.closed) return log(`slow ${id} stopped at ${i - 1} (stream reset)`);
        stream.write(sse({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: token, progress: i, total: count } }));
        await new Promise((r) => setTimeout(r, ms));
      }
      if (stream.destroyed || stream.closed) return;
      stream.end(sse(result(id, text("slow done"))));
      return;
    }
    default:
      return answerJson(stream, 200, result(id, { isError: true, content: [{ type: "text", text: `unknown tool ${params?.name}` }] }));
  }
}

const server = http2.createServer({ maxSessionMemory: 64, maxSendHeaderBlockLength: 8 << 20 });
server.on("stream", (stream, headers) => {
  stream.on("error", (e) => log(`stream error: ${e.code ?? e.message}`));
  if (push) {
    try {
      stream.pushStream({ ":path": "/pushed" }, (err, pushed) => {
        if (err) return log(`push refused: ${err.code ?? err.message}`);
        pushed.respond({ ":status": 200 });
        pushed.end("pushed");
      });
    } catch (e) {
      log(`push refused: ${e.code ?? e.message}`);
    }
  }
  if (headers[":method"] !== "POST" || headers[":path"] !== "/mcp") {
    stream.respond({ ":status": headers[":path"] === "/mcp" ? 405 : 404 });
    stream.end();
    return;
  }
  if (noWindow) {
    // Never read: nghttp2 gives window back only as the body is consumed.
    stream.pause();
    return;
  }
  const chunks = [];
  stream.on("data", (c) => chunks.push(c));
  stream.on("end", () => {
    let message;
    try {
      message = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      return answerJson(stream, 400, error(null, -32700, "Parse error"));
    }
    serve(stream, headers, message).catch((e) => log(`serve failed: ${e.message}`));
  });
});

// The session over the process's own pipes.
const pipes = Duplex.from({ readable: process.stdin, writable: process.stdout });
server.emit("connection", pipes);
process.stdin.on("end", () => {
  log("stopped");
  process.exit(0);
});
