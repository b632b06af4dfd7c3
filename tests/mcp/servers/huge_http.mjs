// tests/mcp/servers/huge_http.mjs - a Streamable HTTP MCP server whose one tool, huge, answers
// a 9 MiB JSON body: more than weft's 8 MiB message cap, so the call must fail as oversized
// (tests/mcp/test_mcp_client.c). Listens on 127.0.0.1:$PORT.
import http from 'node:http';

function json(res, body, headers = {}) {
  res.writeHead(200, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function onPost(res, msg) {
  if (msg.id === undefined) {
    res.writeHead(202);
    return res.end();
  }
  switch (msg.method) {
    case 'initialize':
      return json(res, { jsonrpc: '2.0', id: msg.id,
        result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} },
                  serverInfo: { name: 'huge', version: '1.0.0' } } }, { 'Mcp-Session-Id': 'huge-session' });
    case 'tools/list':
      return json(res, { jsonrpc: '2.0', id: msg.id, result: { tools: [
        { name: 'huge', description: 'answers 9 MiB', inputSchema: { type: 'object' } }] } });
    case 'tools/call':
      return json(res, { jsonrpc: '2.0', id: msg.id,
        result: { content: [{ type: 'text', text: 'x'.repeat(9 * 1024 * 1024) }] } });
    default:
      return json(res, { jsonrpc: '2.0', id: msg.id, result: {} });
  }
}

http.createServer((req, res) => {
  if (req.method !== 'POST') {
    res.writeHead(req.method === 'DELETE' ? 200 : 405);
    return res.end();
  }
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => onPost(res, JSON.parse(body)));
}).listen(Number(process.env.PORT), '127.0.0.1');
