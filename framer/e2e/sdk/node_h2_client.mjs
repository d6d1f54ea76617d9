// A stdio-v2 client that is not ours: Node's built-in `node:http2` (nghttp2
// underneath, no npm packages) talking HTTP/2 with prior knowledge to a
// server it spawns, over the server's stdin and stdout pipes.
//
//   node node_h2_client.mjs SCENARIO SERVER [SERVER_ARGS...]
//
// Runs one named scenario (see SCENARIOS at the end) and prints ONE JSON
// line on stdout: what it saw (statuses, body sizes, timings in ms, errors,
// the server's pid, its VmHWM/VmPeak in KiB read from /proc while it ran,
// how and when it exited, and its final `report` line when it wrote one).
// The Rust tests (framer/e2e/tests/stdio_v2_hostile.rs) assert on it.
// Every wait here has a deadline; the server is killed (SIGKILL) if it has
// not exited by the end, and `killed: true` says so. Headers follow
// framer/stdio-v2/STDIO-V2.md: POST /mcp, content-type, accept,
// mcp-protocol-version, mcp-method, mcp-name.

import http2 from 'node:http2';
import { spawn } from 'node:child_process';
import { Duplex } from 'node:stream';
import fs from 'node:fs';

const [scenario, serverPath, ...serverArgs] = process.argv.slice(2);
if (!scenario || !serverPath) {
  process.stderr.write('usage: node node_h2_client.mjs SCENARIO SERVER [ARGS...]\n');
  process.exit(2);
}

const VERSION = '2025-11-25';
const out = { scenario };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

// ---------------------------------------------------------------- the server

const server = { child: null, pid: 0, stderrTail: '', report: null, started: [], exit: null };

function startServer() {
  const child = spawn(serverPath, serverArgs, { stdio: ['pipe', 'pipe', 'pipe'] });
  server.child = child;
  server.pid = child.pid;
  out.pid = child.pid;
  let partial = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    // Report lines: keep the tool starts and the final report, and a
    // bounded tail of the rest.
    partial += chunk;
    let nl;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      if (line.startsWith('tool_started: ')) {
        try { server.started.push(JSON.parse(line.slice(14))); } catch { /* not ours */ }
      } else if (line.startsWith('report: ')) {
        try { server.report = JSON.parse(line.slice(8)); } catch { /* not ours */ }
      } else if (!line.startsWith('trace: ')) {
        server.stderrTail = (server.stderrTail + line + '\n').slice(-4096);
      }
    }
    if (partial.length > 65536) partial = partial.slice(-65536);
  });
  server.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      server.exit = { code, signal, at: now() };
      resolve(server.exit);
    });
  });
  // Writes to a dead server's stdin must not crash this script.
  child.stdin.on('error', () => {});
  child.stdout.on('error', () => {});
  return child;
}

/// VmHWM, VmRSS and VmPeak of the server in KiB (null once it is gone).
function memory() {
  try {
    const status = fs.readFileSync(`/proc/${server.pid}/status`, 'utf8');
    const field = (name) => {
      const m = status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'));
      return m ? Number(m[1]) : null;
    };
    return { hwm: field('VmHWM'), rss: field('VmRSS'), peak: field('VmPeak') };
  } catch {
    return null;
  }
}

/// Keeps the highest VmHWM and VmPeak seen in out.vmhwm_kib / out.vmpeak_kib.
function sampleMemory() {
  const m = memory();
  if (m) {
    out.vmhwm_kib = Math.max(out.vmhwm_kib ?? 0, m.hwm ?? 0);
    out.vmpeak_kib = Math.max(out.vmpeak_kib ?? 0, m.peak ?? 0);
  }
  return m;
}

/// Waits up to `ms` for the server to exit; SIGKILL after that.
async function reap(ms) {
  const exited = await Promise.race([server.exited, sleep(ms).then(() => null)]);
  if (!exited) {
    out.killed = true;
    server.child.kill('SIGKILL');
    await Promise.race([server.exited, sleep(5000)]);
  }
  out.exit = server.exit && { code: server.exit.code, signal: server.exit.signal };
  out.report = server.report;
  out.stderr_tail = server.stderrTail;
}

// ---------------------------------------------------------------- HTTP/2

function connect(options = {}) {
  const child = startServer();
  const duplex = Duplex.from({ readable: child.stdout, writable: child.stdin });
  const session = http2.connect('http://localhost', {
    createConnection: () => duplex,
    maxSessionMemory: 1024, // MiB: the attacks, not node, decide what is held
    ...options,
  });
  out.session_errors = [];
  session.on('error', (err) => out.session_errors.push(String(err.code ?? err.message)));
  session.on('goaway', (code) => { out.goaway = code; });
  session.on('close', () => { out.session_closed_at = now(); });
  return session;
}

function headersFor(message, extra = {}) {
  const headers = {
    ':method': 'POST',
    ':path': '/mcp',
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  if (message.id !== undefined) headers['mcp-protocol-version'] = VERSION;
  if (message.method !== undefined) headers['mcp-method'] = message.method;
  const name = message.params?.name ?? message.params?.uri;
  if (['tools/call', 'prompts/get', 'resources/read'].includes(message.method) && name !== undefined) {
    headers['mcp-name'] = String(name);
  }
  return { ...headers, ...extra };
}

/// Sends one request; resolves (never rejects) with what came back:
/// {status, type, bytes, body (parsed when JSON and small), events (SSE
/// messages), error, rst, ms}. `read: false` leaves the body unread.
function send(session, message, { headers = {}, body, read = true, deadline = 30000, endStream = true } = {}) {
  const payload = body ?? Buffer.from(JSON.stringify(message));
  const start = now();
  const result = { status: null, bytes: 0 };
  let stream;
  try {
    stream = session.request(
      { ...headersFor(message ?? {}, {}), 'content-length': String(payload.length), ...headers },
      { endStream: false },
    );
  } catch (err) {
    result.error = String(err.code ?? err.message);
    return { stream: null, done: Promise.resolve(result) };
  }
  const chunks = [];
  const done = new Promise((resolve) => {
    const timer = setTimeout(() => {
      result.error = result.error ?? 'deadline';
      result.ms = now() - start;
      resolve(result);
    }, deadline);
    const finish = () => {
      clearTimeout(timer);
      result.ms = now() - start;
      result.rst = stream.rstCode;
      const text = Buffer.concat(chunks);
      if (text.length <= 1 << 20) {
        const s = text.toString('utf8');
        if ((result.type ?? '').startsWith('text/event-stream')) {
          result.events = s.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => {
            try { return JSON.parse(e.slice(6)); } catch { return e; }
          });
        } else if (s.length > 0) {
          try { result.body = JSON.parse(s); } catch { result.text = s.slice(0, 512); }
        }
      }
      resolve(result);
    };
    stream.on('response', (h) => {
      result.status = h[':status'];
      result.type = h['content-type'];
      result.response_ms = now() - start;
    });
    stream.on('data', (chunk) => {
      result.bytes += chunk.length;
      if (result.bytes <= 1 << 20) chunks.push(chunk);
    });
    stream.on('error', (err) => { result.error = String(err.code ?? err.message); });
    stream.on('close', finish);
    if (!read) stream.pause();
  });
  if (endStream) stream.end(payload);
  else stream.write(payload);
  return { stream, done };
}

const call = (id, name, args, meta) => ({
  jsonrpc: '2.0', id, method: 'tools/call',
  params: meta ? { name, arguments: args, _meta: meta } : { name, arguments: args },
});
const ping = (id) => ({ jsonrpc: '2.0', id, method: 'ping' });

/// Waits until `cond()` or `ms` pass; whether it held.
async function until(cond, ms, every = 10) {
  const end = now() + ms;
  while (now() < end) {
    if (cond()) return true;
    await sleep(every);
  }
  return cond();
}

async function closeAndReap(session, ms = 10000) {
  try { session.close(); } catch { /* gone */ }
  await Promise.race([new Promise((r) => session.once('close', r)), sleep(2000)]);
  server.child.stdin.end();
  await reap(ms);
}

// ---------------------------------------------------------------- scenarios

// (a) The release criteria: initialize and discover, tools/list, a call,
// concurrent calls beside a streaming (SSE) result, a reset of a slow call
// then a ping.
async function release() {
  const session = connect();
  const init = await send(session, {
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'node-h2', version: '1' } },
  }).done;
  out.initialize = { status: init.status, version: init.body?.result?.protocolVersion, error: init.error };
  const initialized = await send(session, { jsonrpc: '2.0', method: 'notifications/initialized' }).done;
  out.initialized = { status: initialized.status, bytes: initialized.bytes };
  const modern = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'node-h2', version: '1' },
  };
  const discover = await send(session, { jsonrpc: '2.0', id: 2, method: 'server/discover', params: { _meta: modern } }, {
    headers: { 'mcp-protocol-version': '2026-07-28' },
  }).done;
  out.discover = { status: discover.status, versions: discover.body?.result?.supportedVersions ?? null, error: discover.body?.error ?? discover.error };
  const list = await send(session, { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} }).done;
  out.tools = (list.body?.result?.tools ?? []).map((t) => t.name);
  const echo = await send(session, call(4, 'echo', { text: 'hello' })).done;
  out.echo = { status: echo.status, text: echo.body?.result?.content?.[0]?.text ?? null };

  // A streaming call with progress, and ten calls beside it while it streams.
  const ticks = send(session, call(5, 'ticks', { count: 8, ms: 50 }, { progressToken: 'tok' }));
  const echoes = [];
  for (let i = 0; i < 10; i++) echoes.push(send(session, call(100 + i, 'echo', { text: `echo ${i}` })).done);
  const answered = await Promise.all(echoes);
  out.concurrent = answered.map((r, i) => ({
    status: r.status, right: r.body?.id === 100 + i && r.body?.result?.content?.[0]?.text === `echo ${i}`,
  }));
  const t = await ticks.done;
  const events = t.events ?? [];
  out.streaming = {
    status: t.status, type: t.type ?? null,
    progress: events.filter((e) => e.method === 'notifications/progress').length,
    last_is_result: events.length > 0 && events[events.length - 1].id === 5 && events[events.length - 1].result !== undefined,
  };

  // A reset of a slow call, then a ping answered at once.
  const slow = send(session, call(6, 'slow', { ms: 30000 }));
  await until(() => server.started.some((s) => s.id === 6), 10000);
  slow.stream.close(http2.constants.NGHTTP2_CANCEL);
  const slowResult = await slow.done;
  const p = await send(session, ping(7), { deadline: 10000 }).done;
  out.after_reset = { slow_rst: slowResult.rst, slow_status: slowResult.status, ping_status: p.status, ping_ms: p.ms, ping_id: p.body?.id ?? null, error: p.error ?? null };
  await closeAndReap(session);
}

// Defect 1: `count` calls of `big` (`bytes` each) with a 16 KiB stream
// window, none read. The connection window is opened wide so that only
// the streams' own windows hold data back (and a ping can be answered).
async function unreadBig() {
  const count = Number(process.env.H2_COUNT ?? 40);
  const bytes = Number(process.env.H2_BYTES ?? 8 << 20);
  const session = connect({ settings: { initialWindowSize: 16384 } });
  await new Promise((r) => session.once('connect', r));
  session.setLocalWindowSize(256 << 20);
  // Idle: the server has exec'd, set up its runtime and answered once.
  await send(session, ping(0), { deadline: 20000 }).done;
  sampleMemory();
  out.base_hwm_kib = out.vmhwm_kib;
  const calls = [];
  for (let i = 0; i < count; i++) calls.push(send(session, call(i + 1, 'big', { bytes }), { read: false, deadline: 120000 }));
  // Wait until the server has nothing more to do: every call started (the
  // server may also refuse to admit more) and memory settled.
  let last = -1;
  let stableSince = now();
  const end = now() + Number(process.env.H2_SETTLE_MS ?? 60000);
  while (now() < end) {
    await sleep(200);
    const m = sampleMemory();
    if (!m) break;
    if (m.hwm !== last) { last = m.hwm; stableSince = now(); }
    // Settled: every call started and memory still for 2 s, or memory
    // still for 6 s (a server that admits no more work while its
    // responses wait).
    const allStarted = server.started.length >= count;
    if (now() - stableSince > (allStarted ? 2000 : 6000)) break;
  }
  out.started = server.started.length;
  out.received = calls.reduce((sum, c) => sum + (c.stream?.readableLength ?? 0), 0);
  const p = await send(session, ping(100000), { deadline: 20000 }).done;
  out.ping = { status: p.status, ms: p.ms, error: p.error ?? null };
  sampleMemory();
  for (const c of calls) c.stream?.close(http2.constants.NGHTTP2_CANCEL);
  await closeAndReap(session, 15000);
}

// Defect 2: a request with a 1 MiB header value; then a ping on a fresh
// connection state (the same session if it survived).
async function hugeHeader() {
  const size = Number(process.env.H2_HEADER_BYTES ?? 1 << 20);
  const session = connect({ maxSendHeaderBlockLength: 64 << 20, maxHeaderListPairs: 4096 });
  const r = await send(session, ping(1), { headers: { 'x-pad': 'h'.repeat(size) }, deadline: 20000 }).done;
  out.huge = { status: r.status, error: r.error ?? null, rst: r.rst ?? null, bytes: r.bytes };
  const p = await send(session, ping(2), { deadline: 10000 }).done;
  out.after = { status: p.status, error: p.error ?? null };
  sampleMemory();
  await closeAndReap(session);
}

// Defect 3: one `big` call whose stream waits for window (16 KiB, unread),
// then SIGTERM / SIGINT / the end of stdin (H2_STOP = TERM | INT | EOF).
async function stopBlocked() {
  const stop = process.env.H2_STOP ?? 'TERM';
  const session = connect({ settings: { initialWindowSize: 16384 } });
  const big = send(session, call(1, 'big', { bytes: 8 << 20 }), { read: false, deadline: 60000 });
  // The stream is blocked once its window is used up (16 KiB buffered here).
  out.blocked = await until(() => (big.stream.readableLength ?? 0) >= 16384, 30000);
  out.buffered = big.stream.readableLength;
  await sleep(300);
  const at = now();
  if (stop === 'EOF') server.child.stdin.end();
  else server.child.kill(`SIG${stop}`);
  const exited = await Promise.race([server.exited, sleep(Number(process.env.H2_EXIT_WAIT_MS ?? 15000)).then(() => null)]);
  out.exit_ms = exited ? exited.at - at : null;
  // Not session.destroy(): after the end of stdin node's JS stream socket
  // asserts on the GOAWAY it would write. The server is killed if still there.
  await reap(1);
}

// Defect 4: `params.uri` of another type beside `params.name` hides the
// name from the header check.
async function nameBypass() {
  const session = connect();
  const body = Buffer.from(JSON.stringify({
    jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', uri: 0, arguments: { text: 'bypassed' } },
  }));
  const r = await send(session, null, {
    body,
    headers: { 'mcp-protocol-version': VERSION, 'mcp-method': 'tools/call', 'mcp-name': 'harmless' },
  }).done;
  out.bypass = { status: r.status, code: r.body?.error?.code ?? null, id: r.body?.id ?? null, text: r.body?.result?.content?.[0]?.text ?? null };
  // The control: the same body without `uri` is refused too.
  const plain = Buffer.from(JSON.stringify({
    jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } },
  }));
  const c = await send(session, null, {
    body: plain,
    headers: { 'mcp-protocol-version': VERSION, 'mcp-method': 'tools/call', 'mcp-name': 'harmless' },
  }).done;
  out.control = { status: c.status, code: c.body?.error?.code ?? null };
  await closeAndReap(session);
}

// Defect 6: an id reused right after its stream was reset, `rounds` times.
// Odd rounds reuse it for a ping, even ones for an echo of the round.
async function idReuse() {
  const rounds = Number(process.env.H2_ROUNDS ?? 50);
  const session = connect();
  const bad = [];
  let answered = 0;
  for (let i = 0; i < rounds; i++) {
    // `subprocess` (a `sleep` in its own process tree) takes longer to
    // cancel than `slow`: the dispatcher holds the id while it kills it.
    const slow = send(session, i % 3 === 2
      ? call(7, 'slow', { ms: 30000 })
      : call(7, 'subprocess', { command: ['sleep', '30'] }));
    // Reset once the dispatcher runs the call (it holds the id), then reuse
    // the id at once.
    const ran = await until(() => server.started.filter((s) => s.id === 7 && s.tool !== 'echo').length > i, 5000, 1);
    if (!ran && bad.length < 10) bad.push({ round: i, never_started: true });
    slow.stream.close(http2.constants.NGHTTP2_CANCEL);
    const text = `round ${i}`;
    const again = i % 4 < 2 ? ping(7) : call(7, 'echo', { text });
    const r = await send(session, again, { deadline: 5000 }).done;
    const body = r.body ?? {};
    const right = r.status === 200 && body.id === 7
      && (again.method === 'ping' ? body.result !== undefined && body.result.content === undefined
        : body.result?.content?.[0]?.text === text);
    if (right) answered++;
    else if (bad.length < 10) bad.push({ round: i, method: again.method, status: r.status, error: r.error ?? null, body: r.body ?? r.text ?? null });
    const old = await slow.done;
    if (old.status !== null && bad.length < 10) bad.push({ round: i, reset_call_answered: old.status, body: old.body ?? null });
    if (process.env.H2_TRACE) process.stderr.write(`round ${i} ${right}\n`);
    // A server that lost one answer tends to lose the next: stop early.
    if (bad.length >= 4) { out.stopped_at = i; break; }
  }
  out.rounds = rounds;
  out.answered = answered;
  out.bad = bad;
  await closeAndReap(session);
}

// Defect 8: `count` streams each declaring a large content-length and
// sending a few bytes; then a ping.
async function declaredLength() {
  const count = Number(process.env.H2_COUNT ?? 1000);
  const declared = Number(process.env.H2_DECLARED ?? 16 << 20);
  const session = connect({ peerMaxConcurrentStreams: 4096 });
  await new Promise((r) => session.once('connect', r));
  // Idle: the server has exec'd, set up its runtime and answered once.
  await send(session, ping(0), { deadline: 20000 }).done;
  sampleMemory();
  out.base_hwm_kib = out.vmhwm_kib;
  out.base_peak_kib = out.vmpeak_kib;
  const opened = [];
  for (let i = 0; i < count; i++) {
    const body = Buffer.from(`{"jsonrpc":"2.0","id":${i + 1},"method":"ping","params":{"pad":"`);
    opened.push(send(session, { jsonrpc: '2.0', id: i + 1, method: 'ping' }, {
      body, headers: { 'content-length': String(declared) }, endStream: false, deadline: 60000,
    }));
  }
  for (let i = 0; i < 30; i++) { await sleep(100); sampleMemory(); }
  const p = await send(session, ping(1 << 30), { deadline: 20000 }).done;
  out.ping = { status: p.status, error: p.error ?? null };
  sampleMemory();
  out.closed_early = opened.filter((o) => o.stream?.closed).length;
  for (const o of opened) o.stream?.close(http2.constants.NGHTTP2_CANCEL);
  await closeAndReap(session);
}

// Defect 9: a POST with a body to another path, and a GET on /mcp with a
// body: 404 and 405, each stream ends cleanly (no reset that loses the
// answer), and a ping after them works.
async function badRoutes() {
  const session = connect();
  const body = Buffer.alloc(Number(process.env.H2_BODY ?? 2 << 20), 'b');
  const other = await send(session, ping(1), { headers: { ':path': '/other' }, body, deadline: 10000 }).done;
  out.other = { status: other.status, error: other.error ?? null, rst: other.rst ?? null };
  const get = await send(session, ping(2), { headers: { ':method': 'GET' }, body, deadline: 10000 }).done;
  out.get = { status: get.status, error: get.error ?? null, rst: get.rst ?? null };
  const p = await send(session, ping(3), { deadline: 10000 }).done;
  out.after = { status: p.status, id: p.body?.id ?? null, error: p.error ?? null };
  await closeAndReap(session);
}

// Floods. H2_FLOOD = reset (streams opened and reset at once), ping
// (PING frames), settings (SETTINGS frames). Then a ping request: the
// server answers it, or it ended the connection on purpose (GOAWAY); it
// never hangs, and its memory is sampled throughout.
async function flood() {
  const kind = process.env.H2_FLOOD ?? 'reset';
  const count = Number(process.env.H2_COUNT ?? 20000);
  const session = connect({ maxOutstandingPings: 1 << 20, maxOutstandingSettings: 1 << 20 });
  await new Promise((r) => session.once('connect', r));
  let sent = 0;
  const errors = new Set();
  for (let i = 0; i < count && !session.destroyed && !session.closed; i++) {
    try {
      if (kind === 'reset') {
        const s = session.request(headersFor(ping(i + 1), { 'content-length': '0' }), { endStream: false });
        s.on('error', (e) => errors.add(String(e.code ?? e.message)));
        s.close(http2.constants.NGHTTP2_CANCEL);
      } else if (kind === 'ping') {
        session.ping(Buffer.alloc(8), () => {});
      } else if (kind === 'settings') {
        session.settings({ initialWindowSize: 65535 + (i % 2) }, () => {});
      }
      sent++;
    } catch (err) {
      errors.add(String(err.code ?? err.message));
      break;
    }
    if (i % 500 === 499) { await sleep(1); sampleMemory(); }
  }
  out.sent = sent;
  out.flood_errors = [...errors].slice(0, 5);
  sampleMemory();
  if (!session.destroyed && !session.closed) {
    const p = await send(session, ping(1 << 30), { deadline: 20000 }).done;
    out.ping = { status: p.status, error: p.error ?? null };
  } else {
    out.ping = { status: null, error: 'session closed' };
  }
  sampleMemory();
  await closeAndReap(session);
}

// False lengths: a content-length larger than the body (the stream ends
// early) and smaller than the body (more DATA than declared). Each must be
// refused (a 4xx, or a stream reset, RFC 9113 8.1.1), never served; a ping
// after them works.
async function falseLengths() {
  const session = connect();
  const body = Buffer.from(JSON.stringify(call(1, 'echo', { text: 'declared wrong' })));
  const longer = await send(session, null, {
    body, headers: { ...headersFor(call(1, 'echo', {})), 'content-length': String(body.length + 100) }, deadline: 10000,
  }).done;
  out.declared_longer = { status: longer.status, error: longer.error ?? null, rst: longer.rst ?? null, id: longer.body?.id ?? null };
  const body2 = Buffer.from(JSON.stringify(call(2, 'echo', { text: 'declared wrong' })));
  const shorter = await send(session, null, {
    body: body2, headers: { ...headersFor(call(2, 'echo', {})), 'content-length': String(body2.length - 10) }, deadline: 10000,
  }).done;
  out.declared_shorter = { status: shorter.status, error: shorter.error ?? null, rst: shorter.rst ?? null, id: shorter.body?.id ?? null };
  const p = await send(session, ping(3), { deadline: 10000 }).done;
  out.after = { status: p.status, id: p.body?.id ?? null, error: p.error ?? null };
  await closeAndReap(session);
}

// CONTINUATION flood, in raw frames (node:http2 always ends a header
// block): the preface, an empty SETTINGS, a HEADERS on stream 1 without
// END_HEADERS, then H2_COUNT CONTINUATION frames of ~16 KiB of literal
// headers, never ending the block. The server must end the connection on
// purpose (GOAWAY or closing its side) with its memory bounded.
async function continuationFlood() {
  const count = Number(process.env.H2_COUNT ?? 4096);
  const child = startServer();
  const frame = (type, flags, stream, payload) => {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head[3] = type;
    head[4] = flags;
    head.writeUInt32BE(stream, 5);
    return Buffer.concat([head, payload]);
  };
  const seen = { bytes: 0, goaway: null, frames: [] };
  let pending = Buffer.alloc(0);
  child.stdout.on('data', (chunk) => {
    seen.bytes += chunk.length;
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 9) {
      const len = pending.readUIntBE(0, 3);
      if (pending.length < 9 + len) break;
      const type = pending[3];
      if (seen.frames.length < 32) seen.frames.push(type);
      if (type === 7 && len >= 8) seen.goaway = pending.readUInt32BE(9 + 4);
      pending = pending.subarray(9 + len);
    }
  });
  let stdoutEnded = false;
  child.stdout.on('end', () => { stdoutEnded = true; });
  const write = (buf) => new Promise((resolve) => {
    if (child.stdin.destroyed) return resolve(false);
    child.stdin.write(buf, (err) => resolve(!err));
  });
  await write(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
  await write(frame(4, 0, 0, Buffer.alloc(0)));
  // :method POST, :path /, :scheme http (static table), then literals.
  await write(frame(1, 0x1, 1, Buffer.from([0x83, 0x84, 0x86])));
  // The server is alive here, waiting for the block's end: one sample is
  // sure (it may end the connection and exit after the first frames, before
  // the loop below samples, and the last sample finds it gone).
  sampleMemory();
  const one = Buffer.concat([Buffer.from([0x00, 3]), Buffer.from('x-a'), Buffer.from([100]), Buffer.alloc(100, 'v')]);
  const block = Buffer.concat(Array(150).fill(one));
  let sent = 0;
  for (let i = 0; i < count; i++) {
    const ok = await Promise.race([write(frame(9, 0, 1, block)), sleep(10000).then(() => false)]);
    if (!ok) break;
    sent++;
    if (i % 64 === 63 || i < 8) sampleMemory();
    if (seen.goaway !== null || stdoutEnded) break;
  }
  out.sent = sent;
  out.sent_bytes = sent * (block.length + 9);
  await until(() => seen.goaway !== null || stdoutEnded, 5000);
  sampleMemory();
  out.goaway = seen.goaway;
  out.stdout_ended = stdoutEnded;
  out.frames = seen.frames;
  child.stdin.end();
  await reap(10000);
}

const SCENARIOS = {
  continuation_flood: continuationFlood,
  release, unread_big: unreadBig, huge_header: hugeHeader, stop_blocked: stopBlocked,
  name_bypass: nameBypass, id_reuse: idReuse, declared_length: declaredLength, bad_routes: badRoutes,
  flood, false_lengths: falseLengths,
};

const run = SCENARIOS[scenario];
if (!run) {
  process.stderr.write(`unknown scenario ${scenario}; one of ${Object.keys(SCENARIOS).join(', ')}\n`);
  process.exit(2);
}
const started = now();
try {
  await run();
} catch (err) {
  out.crash = String(err.stack ?? err);
  if (server.child && !server.exit) await reap(100);
}
out.total_ms = now() - started;
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
