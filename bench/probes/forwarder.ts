/**
 * The logic-free Node forwarder bench/proxy.ts measures beside kubectl proxy and ctrlmesh proxy: node:http in front,
 * one undici Pool to the API server behind (the same pool settings and credentials as ctrlmesh's upstream),
 * request and response bodies streamed, no judgement (no parsing, routing, selector, breaker or metrics). Only the
 * hop-by-hop headers are dropped, which HTTP requires. What it costs is the floor a Node proxy can reach.
 *
 *   node dist/bench/probes/forwarder.js <https://api-server> <ca file> <kubeconfig> <port> [h2-watches]
 *
 * The kubeconfig's first context gives the credentials (a client certificate and key, or a token), read as ctrlmesh
 * proxy reads its `--credentials`.
 *
 * With `h2-watches`, watches go instead as streams of a few node:http2 connections (as many streams on each as the
 * server allows), as ctrlmesh's do, with the `AsyncResource#bind` ctrlmesh's proxy uses (src/runtime/async-bind.ts):
 * the floor of a Node proxy for a storm of watches opened at once.
 *
 * Prints `forwarder listening on <port>` once it accepts connections. Started with
 * `--expose-gc --import gc-memory.js` it answers SIGUSR2 with its memory after a forced GC, like the ctrlmesh proxy.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { Pool } from 'undici';
import { loadCredentials } from '../../src/proxy/upstream/credentials.js';
import { useLeanAsyncBind } from '../../src/runtime/index.js';

const [upstream, caFile, kubeconfig, port, mode] = process.argv.slice(2);
if (!upstream || !caFile || !kubeconfig || !port || (mode !== undefined && mode !== 'h2-watches')) {
  process.stderr.write('usage: forwarder <https://api-server> <ca file> <kubeconfig> <port> [h2-watches]\n');
  process.exit(2);
}
// The floor is the best a Node proxy can do: what ctrlmesh's proxy does to Node's runtime, it does too.
if (mode === 'h2-watches') useLeanAsyncBind();
const [credentials] = loadCredentials(kubeconfig).values();
const tls = {
  ca: readFileSync(caFile, 'utf8'),
  ...(credentials?.certPem === undefined ? {} : { cert: credentials.certPem }),
  ...(credentials?.keyPem === undefined ? {} : { key: credentials.keyPem }),
  rejectUnauthorized: true,
};
/** Sent with every request when the credentials are a token. */
const authorization = credentials?.token === undefined ? {} : { authorization: `Bearer ${credentials.token}` };

const pool = new Pool(upstream, {
  // As ctrlmesh's ClusterUpstream: every watch holds a connection of its own, watches stream without a body
  // timeout, idle connections stay 60 s.
  connections: null,
  bodyTimeout: 0,
  keepAliveTimeout: 60_000,
  keepAliveMaxTimeout: 600_000,
  connect: tls,
});

/** How long a response of unknown length may keep its head back waiting for body bytes. */
const FLUSH_MS = 20;

/** Hop-by-hop headers (RFC 9110 7.6.1) and the ones undici sets itself: never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'expect']);

function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

/** HTTP/2 connections for watches (h2-watches), each with its open streams. */
const sessions: { session: ClientHttp2Session; streams: number }[] = [];

/** Streams a connection carries: the test bed's kube-apiserver allows 100 (ctrlmesh asks the server; a probe need not). */
const STREAMS = 100;

function sessionWithRoom(): { session: ClientHttp2Session; streams: number } {
  let found = sessions.find((c) => !c.session.closed && !c.session.destroyed && c.streams < STREAMS);
  if (!found) {
    found = { session: connect(upstream!, tls), streams: 0 };
    found.session.on('error', () => undefined);
    sessions.push(found);
  }
  return found;
}

function watchOverHttp2(req: IncomingMessage, res: ServerResponse): void {
  const connection = sessionWithRoom();
  const stream = connection.session.request({ ...endToEnd(req.headers), ...authorization, ':method': 'GET', ':path': req.url ?? '/' }, { endStream: true });
  connection.streams++;
  stream.once('close', () => connection.streams--);
  stream.once('response', (head) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(head)) if (!name.startsWith(':') && value !== undefined) headers[name] = value;
    res.writeHead(Number(head[':status']), headers);
    res.flushHeaders();
    stream.pipe(res);
  });
  stream.once('error', () => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  res.once('close', () => {
    if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
  });
}

const server = createServer((req, res) => {
  if (mode === 'h2-watches' && req.method === 'GET' && /[?&]watch=(true|1)(&|$)/.test(req.url ?? '')) return watchOverHttp2(req, res);
  const controller = new AbortController();
  // The client went away (a watch closed): the upstream request goes too.
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'DELETE';
  pool
    .stream(
      { method: req.method as 'GET', path: req.url ?? '/', headers: { ...endToEnd(req.headers), ...authorization }, body: hasBody ? req : null, signal: controller.signal },
      ({ statusCode, headers }) => {
        res.writeHead(statusCode, endToEnd(headers as IncomingHttpHeaders));
        // Node sends the head with the first body bytes. A response of unknown length may stay quiet (a watch): its
        // head goes after FLUSH_MS without body, as Go's reverse proxy flushes it (kubectl proxy: 200 ms).
        if (headers['content-length'] === undefined) {
          setTimeout(() => {
            // `headersSent` is true from writeHead on; whether the head reached the socket is `_headerSent`.
            if (!(res as unknown as { _headerSent: boolean })._headerSent && !res.destroyed) res.flushHeaders();
          }, FLUSH_MS).unref();
        }
        return res;
      },
    )
    .catch(() => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
});
server.keepAliveTimeout = 60_000;
// Node's defaults, as a logic-free forwarder has them: accept backlog 511 (the ctrlmesh proxy asks for the kernel's
// most), a TLS context built per connection from the PEM text and undici's weak session cache (the ctrlmesh proxy
// shares one context per cluster and keeps the last session ticket). As the storm's floor (h2-watches) it takes the
// kernel's deepest accept queue too, so its time is its work and not connects turned away.
server.listen({ port: Number(port), host: '127.0.0.1', ...(mode === 'h2-watches' ? { backlog: 65_535 } : {}) }, () =>
  process.stdout.write(`forwarder listening on ${port}\n`),
);
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  for (const { session } of sessions) session.destroy();
  void pool.destroy().finally(() => process.exit(0));
});
