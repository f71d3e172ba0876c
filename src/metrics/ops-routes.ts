import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

/** What /readyz reports: ready, or the reasons it is not (shown to the operator of the process). */
export interface Readiness {
  ready: boolean;
  reasons: string[];
}

export interface OpsRoutesOptions {
  registry: Registry;
  /** Called on each /readyz; cheap and synchronous. */
  readiness: () => Readiness;
}

/** /healthz (the process is alive), /readyz (it can do its job) and /metrics, the same on every server. */
export function registerOpsRoutes(app: FastifyInstance, options: OpsRoutesOptions): void {
  app.get('/healthz', async (_req, reply) => reply.type('text/plain').send('ok'));
  app.get('/readyz', async (_req, reply) => {
    const { ready, reasons } = options.readiness();
    return reply
      .code(ready ? 200 : 503)
      .type('text/plain')
      .send(ready ? 'ok' : `not ready: ${reasons.join('; ')}`);
  });
  app.get('/metrics', async (_req, reply) =>
    reply.type(options.registry.contentType).send(await options.registry.metrics()),
  );
}
