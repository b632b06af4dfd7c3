// tests/mcp/servers/fault.mjs - a raw-stdio MCP server that misbehaves on purpose, for
// tests/mcp/test_mcp_client.c. Usage: node fault.mjs <mode>; modes: ok, garbage (non-JSON lines
// before answers), noinit (never answers initialize), oldversion (answers a protocol version
// weft does not speak). Every line received is appended to $MCP_RECORD when it is set, so the
// test can see what the client sent (cancellations, params._meta).
// Tools: echo, crash (exits mid-call), hang (never answers), fail (isError), rpcerror
// (JSON-RPC error -32602), change (adds a tool and sends notifications/tools/list_changed);
// tools/list pages two tools at a time.
import fs from 'node:fs';
import readline from 'node:readline';

const mode = process.argv[2] || 'ok';
const record = process.env.MCP_RECORD;
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const obj = { type: 'object' };
const tools = ['echo', 'crash', 'hang', 'fail', 'rpcerror', 'change'].map((name) => ({
  name,
  description: `the ${name} tool`,
  inputSchema: obj,
}));

// A server that leaks its secret on stderr: weft must scrub it from its log.
process.stderr.write(`fault server (${mode}) starting, key=${process.env.API_KEY || 'none'}\n`);

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
