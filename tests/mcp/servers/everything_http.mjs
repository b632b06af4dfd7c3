// tests/mcp/servers/everything_http.mjs - server-everything's Streamable HTTP transport bound to
// 127.0.0.1 only (its own script listens on every interface) on $PORT.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || typeof args[0] === 'string') {
    const cb = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
    return listen.call(this, Number(args[0]), '127.0.0.1', cb);
  }
  return listen.apply(this, args);
};
await import('../node_modules/@modelcontextprotocol/server-everything/dist/transports/streamableHttp.js');
