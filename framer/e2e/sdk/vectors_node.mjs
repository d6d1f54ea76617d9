// Runs conformance vectors against the TypeScript SDK's own stdio transports,
// under the runner contract of corpus/vectors/README.md.
//
//     node vectors_node.mjs v1|v2 server|client FEEDER PYTHON < cases (JSON lines)
//
// v1 is `@modelcontextprotocol/sdk`, v2 `@modelcontextprotocol/server` and
// `@modelcontextprotocol/client` (each bundles the same ReadBuffer). Must sit
// beside the node_modules it imports (ESM resolves from the script's folder).
//
// server: a StdioServerTransport on a Readable standing in for stdin; each
// read of the vector is one 'data' event (a read of 0 bytes is none: a pipe
// never delivers an empty chunk), the end of the vector is 'end' then 'close'.
// client: a StdioClientTransport spawns `PYTHON FEEDER VECTOR --go`
// (vectors_feed.py), which writes the vector into the real stdout pipe read
// by read once the runner's first message arrives.
//
// What is a frame: ReadBuffer hands each line (decoded as UTF-8, one trailing
// \r removed) to the global JSON.parse. The runner wraps JSON.parse to record
// the text handed over, then calls the real one; onmessage and onerror then
// give the frame's outcome (v2 drops invalid JSON without calling onerror:
// outcome "ignored"). An error that follows no frame ("ReadBuffer exceeded
// maximum size") is the transport's report of a line over its limit. The
// transport's own close() (wrapped on the instance, then called) before the
// end of stream is the event `closed`; nothing after it is recorded.
//
// A client case has a deadline of 120 s (end state "timeout"); a server case
// waits on nothing (every 'data' event is handled before emit returns).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

const [sdk, side, feeder, python] = process.argv.slice(2);
if (!['v1', 'v2'].includes(sdk) || !['server', 'client'].includes(side) || !feeder || !python) {
    console.error('usage: node vectors_node.mjs v1|v2 server|client FEEDER PYTHON < cases');
    process.exit(2);
}
const CASE_DEADLINE_MS = 120_000;
const here = dirname(fileURLToPath(import.meta.url));
const packageName = sdk === 'v1' ? 'sdk' : side;
const version = JSON.parse(readFileSync(join(here, 'node_modules/@modelcontextprotocol', packageName, 'package.json'))).version;
const module = sdk === 'v1'
    ? await import(`@modelcontextprotocol/sdk/${side}/stdio.js`)
    : await import(`@modelcontextprotocol/${side}/stdio`);
const Transport = side === 'server' ? module.StdioServerTransport : module.StdioClientTransport;

const realParse = JSON.parse;
let onParse = null;
JSON.parse = function (text, reviver) {
    onParse?.(text);
    return realParse.call(this, text, reviver);
};

const emit = event => process.stdout.write(JSON.stringify(event) + '\n');

function newTransport(vectorPath, options) {
    return side === 'server'
        ? new Transport(new Readable({ read() {} }), new Writable({ write(_c, _e, done) { done(); } }), options)
        : new Transport({ command: python, args: [feeder, vectorPath, '--go'], stderr: 'inherit', ...options });
}

// The default limit, read from a fresh transport's own ReadBuffer.
const probe = newTransport('-', {});
emit({
    type: 'hello',
    reader: `${sdk === 'v1' ? '@modelcontextprotocol/sdk' : `@modelcontextprotocol/${side}`} ${version} Stdio${side === 'server' ? 'Server' : 'Client'}Transport`,
    version,
    limit: {
        default: probe._readBuffer._maxBufferSize,
        configurable: true,
        counts: 'the bytes buffered: the partial line, its \\r and \\n, and whatever else the read brought',
    },
});

async function runCase(c) {
    const vector = realParse(readFileSync(c.vector, 'utf8'));
    const options = c.limit === 'vector' ? { maxBufferSize: vector.config.max_frame } : {};
    const transport = newTransport(c.vector, options);
    const events = [];
    let ended = false;
    let started = 0;
    let lastFrame = null;
    const lastOpenFrame = () => {
        const last = events.at(-1);
        return last?.type === 'frame' && last.outcome === undefined ? last : null;
    };
    // After the transport closed the session itself, what it still does is
    // not recorded: a client transport keeps its 'data' listener until the
    // server exits (close() ends the server's stdin, SIGTERM after 2 s), so
    // what it hands on then depends on how fast that server stops.
    let selfClosed = false;
    onParse = text => {
        if (selfClosed) return;
        lastFrame = performance.now();
        events.push({ type: 'frame', hex: Buffer.from(text, 'utf8').toString('hex') });
    };
    transport.onmessage = () => {
        if (selfClosed) return;
        const frame = lastOpenFrame();
        if (frame) frame.outcome = 'message';
    };
    transport.onerror = error => {
        if (selfClosed) return;
        const frame = lastOpenFrame();
        if (frame) {
            frame.outcome = 'rejected';
            frame.detail = `${error?.name ?? 'Error'} passed to onerror`;
        } else if (/exceeded maximum size/.test(String(error?.message))) {
            events.push({ type: 'oversize', detail: String(error.message) });
        } else {
            events.push({ type: 'error', message: String(error?.message ?? error) });
        }
    };
    const closedBySdk = transport.close.bind(transport);
    transport.close = () => {
        if (!ended && !selfClosed) {
            selfClosed = true;
            events.push({ type: 'closed', detail: 'the transport called its own close()' });
        }
        return closedBySdk();
    };
    let state = 'eof';
    if (side === 'server') {
        await transport.start();
        const stdin = transport._stdin;
        const input = Buffer.from(vector.input_hex, 'hex');
        started = performance.now();
        let pos = 0;
        for (const size of vector.chunks) {
            const chunk = input.subarray(pos, pos + size);
            pos += size;
            if (size > 0) stdin.emit('data', Buffer.from(chunk));
            await new Promise(resolve => setImmediate(resolve));
        }
        ended = true;
        stdin.emit('end');
        stdin.emit('close');
        await new Promise(resolve => setImmediate(resolve));
    } else {
        const closed = new Promise(resolve => { transport.onclose = resolve; });
        await transport.start();
        started = performance.now();
        await transport.send({ jsonrpc: '2.0', method: 'go' });
        let timer;
        const deadline = new Promise(resolve => { timer = setTimeout(() => resolve('timeout'), CASE_DEADLINE_MS); });
        if ((await Promise.race([closed, deadline])) === 'timeout') {
            state = 'timeout';
            ended = true;
            await closedBySdk();
        }
        clearTimeout(timer);
        ended = true;
    }
    onParse = null;
    for (const event of events) {
        if (event.type === 'frame' && event.outcome === undefined) {
            event.outcome = 'ignored';
            event.detail = 'dropped without a report';
        }
    }
    if (selfClosed && state === 'eof') state = 'closed';
    for (const event of events) emit({ case: c.case, ...event });
    emit({ case: c.case, type: 'end', state, seconds: lastFrame === null ? null : (lastFrame - started) / 1000 });
}

let input = '';
for await (const chunk of process.stdin) input += chunk;
for (const line of input.split('\n')) {
    if (line.trim()) await runCase(realParse(line));
}
// Exit once stdout is flushed (a pipe is written asynchronously), whatever
// the transports left running.
process.stdout.write('', () => process.exit(0));
