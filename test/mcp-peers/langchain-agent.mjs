#!/usr/bin/env node
// A LangChain.js agent's tool-using steps against a server in Search mode (progressive
// discovery), for cantus-operator's end-to-end tests (driven from Go by test/peers).
//
//   node langchain-agent.mjs --url http://127.0.0.1:1234/mcp [--header 'Authorization: Bearer x']...
//                            --expect-tools a,find_tools,call_tool --task TEXT --args JSON
//                            [--limit N] [--probe TEXT]... [--timeout MS]
//
// No model is reachable here, so the script plays the model's part and nothing else: the
// tools are LangChain's own (MultiServerMCPClient over streamable HTTP turns the listed MCP
// tools into DynamicStructuredTools), and they are invoked the way an agent's tool node
// invokes them, with a tool call ({name, args, id, type: "tool_call"}) answered by a
// ToolMessage. The steps a model would choose are fixed: find_tools with the task, then
// call_tool with the top result's name and --args (the arguments a model would write from
// the found tool's inputSchema).
//
// It checks that the tools LangChain loaded are exactly --expect-tools (the pinned tools
// and the meta-tools), runs each --probe query through find_tools too (to show what a
// caller can and cannot find), and prints ONE JSON object on stdout:
//   {"tools":[...],"found":[{"name","reason"}...],"chosen":"...","chosenSchema":{...},
//    "result":"...","probes":{"QUERY":["name",...]}}
// Any failure (connection, a missing tool, a tool error) exits non-zero with the error on
// stderr.
import { parseArgs } from 'node:util';
import { MultiServerMCPClient } from '@langchain/mcp-adapters';

function fail(msg) {
  process.stderr.write(`langchain-agent: ${msg}\n`);
  process.exit(1);
}

let opts;
try {
  opts = parseArgs({
    options: {
      url: { type: 'string' },
      header: { type: 'string', multiple: true, default: [] },
      'expect-tools': { type: 'string', default: '' },
      task: { type: 'string' },
      args: { type: 'string', default: '{}' },
      limit: { type: 'string', default: '5' },
      probe: { type: 'string', multiple: true, default: [] },
      timeout: { type: 'string', default: '20000' },
    },
    strict: true,
    allowPositionals: false,
  }).values;
} catch (err) {
  fail(err.message);
}
if (!opts.url || !opts.task) fail('--url and --task are required');

const headers = {};
for (const h of opts.header) {
  const i = h.indexOf(':');
  if (i <= 0) fail(`--header ${JSON.stringify(h)} is not 'Name: value'`);
  headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
}

const client = new MultiServerMCPClient({
  mcpServers: {
    cantus: { transport: 'http', url: opts.url, headers, automaticSSEFallback: false },
  },
  useStandardContentBlocks: true,
  defaultToolTimeout: Number(opts.timeout),
});

let step = 0;
// invoke runs a LangChain tool as an agent's tool node does: with a tool call, which
// yields a ToolMessage (content for the model, artifact for the program).
async function invoke(tool, args) {
  const msg = await tool.invoke({ name: tool.name, args, id: `call_${++step}`, type: 'tool_call' });
  if (msg.status === 'error') throw new Error(`${tool.name}: ${textOf(msg.content)}`);
  return msg;
}

function textOf(content) {
  if (typeof content === 'string') return content;
  return (content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join('\n');
}

// found reads find_tools' answer: its structuredContent, which the adapters put in the
// ToolMessage's artifact.
function found(msg) {
  const sc = (msg.artifact ?? []).find((a) => a.type === 'mcp_structured_content')?.data;
  if (!sc || !Array.isArray(sc.matches)) {
    throw new Error(`find_tools answered no structured matches: ${JSON.stringify(msg.content)}`);
  }
  return sc;
}

try {
  const tools = await client.getTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const names = tools.map((t) => t.name).sort();
  const want = opts['expect-tools'].split(',').filter(Boolean).sort();
  if (JSON.stringify(names) !== JSON.stringify(want)) {
    throw new Error(`LangChain loaded the tools ${JSON.stringify(names)}, want ${JSON.stringify(want)}`);
  }
  const find = byName.find_tools;
  const call = byName.call_tool;
  const limit = Number(opts.limit);

  // Step 1, the model asks for tools fitting the task.
  const answer = found(await invoke(find, { query: opts.task, limit }));
  if (answer.matches.length === 0) throw new Error(`find_tools found nothing for ${JSON.stringify(opts.task)}`);
  // Step 2, the model picks the best match and calls it through call_tool.
  const chosen = answer.matches[0].name;
  const def = answer.tools.find((t) => t.name === chosen);
  const result = await invoke(call, { name: chosen, arguments: JSON.parse(opts.args) });

  const probes = {};
  for (const q of opts.probe) {
    probes[q] = found(await invoke(find, { query: q, limit })).matches.map((m) => m.name);
  }
  process.stdout.write(JSON.stringify({
    tools: names,
    found: answer.matches.map((m) => ({ name: m.name, reason: m.reason })),
    chosen,
    chosenSchema: def?.inputSchema ?? null,
    result: textOf(result.content),
    probes,
  }) + '\n');
} catch (err) {
  fail(err?.stack ?? String(err));
} finally {
  await client.close();
}
