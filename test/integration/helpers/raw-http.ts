import { connect } from 'node:net';
import type { Readable } from 'node:stream';

export interface RawResponse {
  status: number;
  headers: string;
  /** The body as received (chunked framing removed when the response was chunked and complete). */
  body: string;
  /** Everything the server sent, head included. */
  text: string;
}

/**
 * Sends one request exactly as written (no client normalises the path or headers, as fetch and client-node
 * would) and reads the answer until the server closes or `readMs` passes: enough for a watch to show what it sends.
 */
export function rawRequest(
  url: string,
  request: { method: string; target: string; headers?: Record<string, string>; body?: string | Readable; readMs?: number },
): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    const headers: Record<string, string> = { host: `${hostname}:${port}`, connection: 'close', ...request.headers };
    const body = request.body;
    if (typeof body === 'string') headers['content-length'] = String(Buffer.byteLength(body));
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const head = split < 0 ? text : text.slice(0, split);
      let rest = split < 0 ? '' : text.slice(split + 4);
      if (/^transfer-encoding:\s*chunked/imu.test(head)) rest = dechunk(rest);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/u.exec(text)?.[1] ?? 0), headers: head, body: rest, text });
    };
    const timer = setTimeout(finish, request.readMs ?? 10_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', finish);
    socket.on('error', (err) => (chunks.length > 0 ? finish() : reject(err)));
    socket.write(`${request.method} ${request.target} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
    if (typeof body === 'string') socket.write(body);
    else if (body) body.pipe(socket, { end: false }).on('error', () => socket.destroy());
  });
}

/** Removes chunked framing, keeping what is complete. */
function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const line = rest.indexOf('\r\n');
    if (line < 0) return out;
    const size = Number.parseInt(rest.slice(0, line), 16);
    if (!Number.isFinite(size) || size === 0) return out;
    out += rest.slice(line + 2, line + 2 + size);
    rest = rest.slice(line + 2 + size + 2);
  }
}
