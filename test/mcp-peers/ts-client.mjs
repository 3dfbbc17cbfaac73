#!/usr/bin/env node
// A real MCP client built on the official TypeScript SDK, for cantus-operator's
// end-to-end tests (driven from Go by test/peers).
//
//   node ts-client.mjs --url http://127.0.0.1:1234/mcp [--transport streamable-http|sse]
//                      [--header 'Authorization: Bearer x']... [--call TOOL [--args JSON]]
//                      [--timeout MS] [--progress] [--cancel-after-progress N]
//
// --progress asks for progress notifications about the call (the SDK sends a progress
// token) and collects them; --cancel-after-progress N cancels the call (the SDK sends
// notifications/cancelled) once N have arrived. Log messages (notifications/message)
// are always collected.
//
// --elicit JSON declares the elicitation capability and accepts every elicitation/create
// with that content; --sample TEXT declares sampling and answers every
// sampling/createMessage with TEXT. Without them the client declares neither. The
// requests received are printed under "asked" ({method, message}). --declare
// elicitation,roots,sampling declares those capabilities too (to list what a server
// offers such clients); requests the other options do not answer are declined:
// elicitation with action "decline", sampling with an error, roots with no roots.
//
// --declare elicitation-url declares URL-mode elicitation (elicitation: {url: {}}).
// --call-error-ok prints a call that fails with a JSON-RPC error under "callError"
// ({code, message, data}) and exits 0, rather than failing.
//
// --subscribe URI subscribes to the resource (resources/subscribe) before the call;
// --wait-updated N then waits, after the call, until N notifications/resources/updated
// about it arrived (or --timeout passed: exit 1). The URIs of every update received are
// printed under "updated".
//
// It connects (initialize handshake), lists the tools (every page), optionally calls one,
// and prints ONE JSON object on stdout:
//   {"serverInfo":{...},"protocolVersion":"...","capabilities":{...},"instructions":"...",
//    "tools":[...],"result":{...},"progress":[...],"logs":[...],"cancelled":false}
// A tool result with isError:true is still exit 0 (the caller inspects it). A failed
// connection, handshake or request exits non-zero with the error on stderr.
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import {
  LoggingMessageNotificationSchema, ElicitRequestSchema, CreateMessageRequestSchema, ListRootsRequestSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

function usage(msg) {
  process.stderr.write(`ts-client: ${msg}\n` +
    'usage: node ts-client.mjs --url URL [--transport streamable-http|sse] ' +
    "[--header 'Name: value']... [--call TOOL [--args JSON]] [--timeout MS]\n");
  process.exit(2);
}

let opts;
try {
  opts = parseArgs({
    options: {
      url: { type: 'string' },
      transport: { type: 'string', default: 'streamable-http' },
      header: { type: 'string', multiple: true, default: [] },
      call: { type: 'string' },
      args: { type: 'string' },
      timeout: { type: 'string', default: '30000' },
      progress: { type: 'boolean', default: false },
      'cancel-after-progress': { type: 'string' },
      elicit: { type: 'string' },
      declare: { type: 'string' },
      sample: { type: 'string' },
      subscribe: { type: 'string' },
      'wait-updated': { type: 'string' },
      'call-error-ok': { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  }).values;
} catch (err) {
  usage(err.message);
}
if (!opts.url) usage('--url is required');

let url;
try {
  url = new URL(opts.url);
} catch {
  usage(`--url ${JSON.stringify(opts.url)} is not a URL`);
}

const headers = {};
for (const h of opts.header) {
  const i = h.indexOf(':');
  if (i <= 0) usage(`--header ${JSON.stringify(h)} is not 'Name: value'`);
  headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
}

let toolArgs;
if (opts.args !== undefined) {
  if (opts.call === undefined) usage('--args needs --call');
  try {
    toolArgs = JSON.parse(opts.args);
  } catch (err) {
    usage(`--args is not JSON: ${err.message}`);
  }
}

const timeout = Number(opts.timeout);
if (!Number.isFinite(timeout) || timeout <= 0) usage('--timeout must be a positive number of milliseconds');
const requestOptions = { timeout };

let transport;
switch (opts.transport) {
  case 'streamable-http':
    transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
    break;
  case 'sse':
    transport = new SSEClientTransport(url, { requestInit: { headers } });
    break;
  default:
    usage(`--transport must be streamable-http or sse, not ${JSON.stringify(opts.transport)}`);
}

// The SDK hands the negotiated protocol version to HTTP transports; capture it there.
let protocolVersion = null;
if (typeof transport.setProtocolVersion === 'function') {
  const set = transport.setProtocolVersion.bind(transport);
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
    set(v);
  };
}

let elicitContent;
if (opts.elicit !== undefined) {
  try {
    elicitContent = JSON.parse(opts.elicit);
  } catch (err) {
    usage(`--elicit is not JSON: ${err.message}`);
  }
}
const capabilities = {};
if (elicitContent !== undefined) capabilities.elicitation = {};
if (opts.sample !== undefined) capabilities.sampling = {};
const declared = (opts.declare ?? '').split(',').filter((c) => c !== '');
for (const c of declared) {
  if (c === 'elicitation-url') {
    capabilities.elicitation = { ...(capabilities.elicitation ?? {}), url: {} };
    continue;
  }
  if (!['elicitation', 'roots', 'sampling'].includes(c)) usage(`--declare: unknown capability ${JSON.stringify(c)}`);
  capabilities[c] ??= {};
}

const client = new Client({ name: 'cantus-e2e-ts-client', version: '1.0.0' }, { capabilities });
const logs = [];
const asked = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
const updated = [];
let onUpdated = () => {};
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  updated.push(n.params.uri);
  onUpdated();
});
if (elicitContent !== undefined) {
  client.setRequestHandler(ElicitRequestSchema, (req) => {
    asked.push({ method: req.method, message: req.params.message });
    return { action: 'accept', content: elicitContent };
  });
}
if (elicitContent === undefined && declared.includes('elicitation')) {
  client.setRequestHandler(ElicitRequestSchema, (req) => {
    asked.push({ method: req.method, message: req.params.message });
    return { action: 'decline' };
  });
}
if (opts.sample === undefined && declared.includes('sampling')) {
  client.setRequestHandler(CreateMessageRequestSchema, (req) => {
    asked.push({ method: req.method, message: '' });
    throw new Error('ts-client declines to sample');
  });
}
if (declared.includes('roots')) {
  client.setRequestHandler(ListRootsRequestSchema, (req) => {
    asked.push({ method: req.method, message: '' });
    return { roots: [] };
  });
}
if (opts.sample !== undefined) {
  client.setRequestHandler(CreateMessageRequestSchema, (req) => {
    const first = req.params.messages?.[0]?.content;
    asked.push({ method: req.method, message: first?.type === 'text' ? first.text : '' });
    return { role: 'assistant', content: { type: 'text', text: opts.sample }, model: 'cantus-e2e-model', stopReason: 'endTurn' };
  });
}

let cancelAfter;
if (opts['cancel-after-progress'] !== undefined) {
  cancelAfter = Number(opts['cancel-after-progress']);
  if (!Number.isInteger(cancelAfter) || cancelAfter <= 0) usage('--cancel-after-progress must be a positive integer');
  if (!opts.progress) usage('--cancel-after-progress needs --progress');
}

let waitUpdated = 0;
if (opts['wait-updated'] !== undefined) {
  waitUpdated = Number(opts['wait-updated']);
  if (!Number.isInteger(waitUpdated) || waitUpdated <= 0) usage('--wait-updated must be a positive integer');
  if (opts.subscribe === undefined) usage('--wait-updated needs --subscribe');
}

// Whatever happens, never hang the Go test: hard deadline on the whole run.
const watchdog = setTimeout(() => {
  process.stderr.write(`ts-client: gave up after ${timeout * 2} ms\n`);
  process.exit(4);
}, timeout * 2);
watchdog.unref();

let stage = 'connect';
try {
  await client.connect(transport, requestOptions);

  stage = 'tools/list';
  const tools = [];
  const seen = new Set();
  let cursor;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor }, requestOptions);
    tools.push(...page.tools);
    cursor = page.nextCursor;
    if (cursor !== undefined) {
      if (seen.has(cursor)) throw new Error(`tools/list repeated cursor ${JSON.stringify(cursor)}`);
      seen.add(cursor);
    }
  } while (cursor !== undefined);

  const out = {
    serverInfo: client.getServerVersion() ?? null,
    protocolVersion,
    capabilities: client.getServerCapabilities() ?? null,
    instructions: client.getInstructions() ?? null,
    tools,
  };

  if (opts.subscribe !== undefined) {
    stage = `resources/subscribe ${opts.subscribe}`;
    await client.subscribeResource({ uri: opts.subscribe }, requestOptions);
  }

  if (opts.call !== undefined) {
    stage = `tools/call ${opts.call}`;
    const progress = [];
    const abort = new AbortController();
    const callOptions = { ...requestOptions, signal: abort.signal };
    if (opts.progress) {
      callOptions.onprogress = (p) => {
        progress.push(p);
        if (cancelAfter !== undefined && progress.length >= cancelAfter) abort.abort('cancelled by ts-client');
      };
    }
    out.cancelled = false;
    try {
      out.result = await client.callTool({ name: opts.call, arguments: toolArgs ?? {} }, undefined, callOptions);
    } catch (err) {
      if (!abort.signal.aborted) {
        if (!opts['call-error-ok'] || !err || typeof err.code !== 'number') throw err;
        out.callError = { code: err.code, message: err.message, data: err.data ?? null };
        out.result = null;
      } else {
        out.cancelled = true;
        // The SDK sends notifications/cancelled without waiting; let it leave before closing.
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    out.progress = progress;
    out.logs = logs;
    out.asked = asked;
  }

  if (waitUpdated > 0) {
    stage = `waiting for ${waitUpdated} notifications/resources/updated about ${opts.subscribe}`;
    const about = () => updated.filter((u) => u === opts.subscribe).length;
    await new Promise((resolve, reject) => {
      if (about() >= waitUpdated) return resolve();
      const timer = setTimeout(() => reject(new Error(`only ${about()} arrived within ${timeout} ms`)), timeout);
      onUpdated = () => {
        if (about() >= waitUpdated) {
          clearTimeout(timer);
          resolve();
        }
      };
    });
  }
  if (opts.subscribe !== undefined) out.updated = updated;

  process.stdout.write(JSON.stringify(out) + '\n');
  stage = 'close';
  await client.close().catch(() => {});
  process.exit(0);
} catch (err) {
  const code = err && typeof err === 'object' && 'code' in err ? ` (code ${err.code})` : '';
  process.stderr.write(`ts-client: ${stage} failed${code}: ${err?.message ?? String(err)}\n`);
  await client.close().catch(() => {});
  process.exit(1);
}
