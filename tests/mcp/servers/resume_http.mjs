// tests/mcp/servers/resume_http.mjs - a Streamable HTTP MCP server that drops the event stream
// of a tools/call after its first event (a progress notification), and answers the call on the
// GET that resumes the stream with Last-Event-ID. Listens on 127.0.0.1:$PORT; appends every
// Last-Event-ID it gets to $RECORD.
import http from 'node:http';
import fs from 'node:fs';

const record = process.env.RECORD;
let pending = null; // the id of the tools/call whose stream was dropped

function json(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function onPost(req, res, body) {
  let msg;
  try {
    msg = JSON.parse(body);
  } catch {
    return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } });
  }
  if (msg.id === undefined) {
    res.writeHead(202);
    return res.end();
  }
  switch (msg.method) {
    case 'initialize':
      return json(res, 200, {
        jsonrpc: '2.0', id: msg.id,
        result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} },
                  serverInfo: { name: 'resume', version: '1.0.0' } },
      }, { 'Mcp-Session-Id': 'resume-session' });
    case 'tools/list':
      return json(res, 200, { jsonrpc: '2.0', id: msg.id, result: { tools: [
        { name: 'slow', description: 'answers on a resumed stream', inputSchema: { type: 'object' } }] } });
    case 'tools/call': {
      pending = msg.id;
      const token = msg.params?._meta?.progressToken;
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(`id: 1\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress',
        params: { progressToken: token, progress: 1, total: 2 } })}\n\n`);
      // The stream breaks before the answer.
      setTimeout(() => res.socket.destroy(), 50);
      return;
    }
    default:
      return json(res, 200, { jsonrpc: '2.0', id: msg.id, result: {} });
  }
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    const last = req.headers['last-event-id'];
    if (last === undefined || pending === null) {
      res.writeHead(405);
      return res.end();
    }
    if (record) {
      fs.appendFileSync(record, `Last-Event-ID: ${last}\n`);
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.end(`id: 2\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: pending,
      result: { content: [{ type: 'text', text: 'resumed after event ' + last }] } })}\n\n`);
    pending = null;
    return;
  }
  if (req.method === 'DELETE') {
    res.writeHead(200);
    return res.end();
  }
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => onPost(req, res, body));
});
server.listen(Number(process.env.PORT), '127.0.0.1');
