// tests/mcp/servers/fault.mjs - a raw-stdio MCP server that misbehaves on purpose, for
// tests/mcp/test_mcp_client.c and test_mcp_faults.c. Usage: node fault.mjs <mode>; modes: ok,
// garbage (non-JSON lines before answers), noinit (never answers initialize), oldversion
// (answers a protocol version weft does not speak), nostart (explains on stderr that a module
// is missing, as node does, and exits 1 before reading anything). Every line received is
// appended to $MCP_RECORD when it is set, so the test can see what the client sent
// (cancellations, params._meta).
// Tools: echo, crash (exits mid-call), hang (never answers), fail (isError), rpcerror
// (JSON-RPC error -32602), change (adds a tool and sends notifications/tools/list_changed),
// huge (a 50 MB result on one line), invalid (answers a line that is not JSON);
// tools/list pages two tools at a time.
import fs from 'node:fs';
import readline from 'node:readline';

const mode = process.argv[2] || 'ok';
const record = process.env.MCP_RECORD;
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const obj = { type: 'object' };
const tools = ['echo', 'crash', 'hang', 'fail', 'rpcerror', 'change', 'huge', 'invalid'].map((name) => ({
  name,
  description: `the ${name} tool`,
  inputSchema: obj,
}));

// A server that leaks its secret on stderr: weft must scrub it from its log.
process.stderr.write(`fault server (${mode}) starting, key=${process.env.API_KEY || 'none'}\n`);

if (mode === 'nostart') {
  process.stderr.write("Error: Cannot find module 'fault-server-dependency'\n    at load (fault.mjs)\n");
  process.exit(1);
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (record) fs.appendFileSync(record, line + '\n');
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (mode === 'garbage') process.stdout.write('this is not json\n{"not":"jsonrpc"}\n');
  if (m.method === 'initialize') {
    if (mode === 'noinit') return;
    send({
      jsonrpc: '2.0',
      id: m.id,
      result: {
        protocolVersion: mode === 'oldversion' ? '2024-01-01' : m.params.protocolVersion,
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: 'fault', version: '1.0.0' },
        instructions: 'a server that breaks',
      },
    });
  } else if (m.method === 'tools/list') {
    const start = m.params && m.params.cursor ? Number(m.params.cursor) : 0;
    const result = { tools: tools.slice(start, start + 2) };
    if (start + 2 < tools.length) result.nextCursor = String(start + 2);
    send({ jsonrpc: '2.0', id: m.id, result });
  } else if (m.method === 'ping') {
    send({ jsonrpc: '2.0', id: m.id, result: {} });
  } else if (m.method === 'tools/call') {
    const name = m.params.name;
    if (name === 'crash') process.exit(3);
    if (name === 'hang') return;
    if (name === 'fail') {
      send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'it broke' }], isError: true } });
      return;
    }
    if (name === 'huge') {
      // 50 MB of text in one answer: more than any client should hold for one message.
      // Written in pieces, as a real server streams a big answer.
      const head = JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: '' }] } });
      const cut = head.indexOf('"text":"') + 8;
      process.stdout.write(head.slice(0, cut));
      const chunk = 'x'.repeat(1 << 20);
      for (let i = 0; i < 50; i++) process.stdout.write(chunk);
      process.stdout.write(head.slice(cut) + '\n');
      return;
    }
    if (name === 'invalid') {
      process.stdout.write(`{"jsonrpc":"2.0","id":${m.id},"result":{"content":[{"type":"text","text":"cut \n`);
      return;
    }
    if (name === 'rpcerror') {
      send({ jsonrpc: '2.0', id: m.id, error: { code: -32602, message: 'bad params' } });
      return;
    }
    if (name === 'change') {
      tools.push({ name: 'added', inputSchema: obj });
      send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    }
    send({
      jsonrpc: '2.0',
      id: m.id,
      result: {
        content: [
          { type: 'text', text: 'echo:' + JSON.stringify(m.params.arguments || {}) },
          { type: 'image', data: 'AAAA', mimeType: 'image/png' },
        ],
      },
    });
  }
});
