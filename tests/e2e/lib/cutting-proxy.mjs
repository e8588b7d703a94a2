// A counting HTTP proxy for resume tests: forwards every request to `upstream` (tools/serve.py),
// records each request's path and Range header and the body bytes sent per path, and can cut
// the first response of one path after `cutAfter` body bytes (the socket is destroyed, as a
// dropped connection would be).
//
//   const proxy = await startCuttingProxy({ upstream: server.url, cutPath: '/models/x/w.data', cutAfter: 1e6 });
//   ... page.goto(proxy.url) ...; proxy.requests -> [{path, range, status}]; proxy.bytes.get(path)
import http from 'node:http';

export async function startCuttingProxy({ upstream, cutPath = null, cutAfter = 0 }) {
  const target = new URL(upstream);
  const requests = [];
  const bytes = new Map();
  let cuts = 0;
  const server = http.createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const record = { path, range: req.headers.range ?? null, status: 0, cut: false };
    requests.push(record);
    const forward = http.request({
      host: target.hostname, port: target.port, method: req.method, path: req.url,
      headers: { ...req.headers, host: target.host },
    }, (up) => {
      record.status = up.statusCode;
      res.writeHead(up.statusCode, up.headers);
      const cutThis = path === cutPath && cuts === 0 && up.statusCode === 200;
      if (cutThis) cuts++;
      let sent = 0;
      up.on('data', (chunk) => {
        if (record.cut) return;
        if (cutThis && sent + chunk.length >= cutAfter) {
          const part = chunk.subarray(0, Math.max(0, cutAfter - sent));
          sent += part.length;
          bytes.set(path, (bytes.get(path) ?? 0) + part.length);
          record.cut = true;
          record.sent = sent;
          res.write(part, () => setTimeout(() => { up.destroy(); res.socket?.destroy(); }, 50));
          return;
        }
        sent += chunk.length;
        bytes.set(path, (bytes.get(path) ?? 0) + chunk.length);
        res.write(chunk);
      });
      up.on('end', () => { if (!record.cut) res.end(); });
    });
    forward.on('error', (error) => { res.destroy(error); });
    req.pipe(forward);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/`;
  const stop = () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); });
  return { url, requests, bytes, stop };
}
