import { connect } from 'node:tls';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startWebhookServer } from '../../../src/agent/webhook.js';
import { createAgentMetrics, createRegistry } from '../../../src/metrics/index.js';
import { createHashSettings } from '../../../src/sharding/index.js';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/index.js';

describe('the labelling webhook server', () => {
  it('closes at once on stop, even with a review in flight on a kept-alive connection', async () => {
    const ca = await createCertificateAuthority({ commonName: 'webhook-test-ca' });
    const serving = await issueCertificate({ ca, commonName: 'agent', ipAddresses: ['127.0.0.1'], usage: 'server' });
    const { app, port } = await startWebhookServer({
      tls: { ...serving, caPem: ca.certPem },
      host: '127.0.0.1',
      port: 0,
      settings: createHashSettings(),
      skip: new Set(),
      logger: pino({ level: 'silent' }),
      metrics: createAgentMetrics(createRegistry('agent')),
    });
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
});
