import { connect } from 'node:tls';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startWebhookServer } from '../../../src/agent/webhook.js';
import { createAgentMetrics, createRegistry } from '../../../src/metrics/index.js';
import { createHashSettings } from '../../../src/sharding/index.js';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/index.js';

async function serve(readTimeoutMs?: number) {
  const ca = await createCertificateAuthority({ commonName: 'webhook-test-ca' });
  const serving = await issueCertificate({ ca, commonName: 'agent', ipAddresses: ['127.0.0.1'], usage: 'server' });
  const server = await startWebhookServer({
    tls: { ...serving, caPem: ca.certPem },
    host: '127.0.0.1',
    port: 0,
    settings: createHashSettings(),
    skip: new Set(),
    logger: pino({ level: 'silent' }),
    metrics: createAgentMetrics(createRegistry('agent')),
    ...(readTimeoutMs === undefined ? {} : { readTimeoutMs }),
  });
  return { ...server, ca };
}

describe('the labelling webhook server', () => {
  it('closes at once on stop, even with a review in flight on a kept-alive connection', async () => {
    const { app, port, ca } = await serve();
    // A review whose body is still coming, as from an API server that keeps its connection: the request is open.
    const socket = connect({ host: '127.0.0.1', port, ca: ca.certPem });
    await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
    socket.write('POST /mutate HTTP/1.1\r\nhost: agent\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"apiVersion":');
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, 100));
    const started = performance.now();
    await app.close();
    await ended;
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('cuts off a review whose body never finishes, instead of holding its connection', async () => {
    const { app, port, ca } = await serve(1_000);
    const socket = connect({ host: '127.0.0.1', port, ca: ca.certPem });
    await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const started = performance.now();
    socket.write('POST /mutate HTTP/1.1\r\nhost: agent\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"apiVersion":');
    await ended;
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(Buffer.concat(chunks).toString('latin1')).toMatch(/^HTTP\/1\.1 408 /u);
    await app.close();
  }, 30_000);
});
