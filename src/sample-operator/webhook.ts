import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import type { V1ConfigMap } from '@kubernetes/client-node';

/** The data key the sample webhook keeps unique among the demo ConfigMaps of a namespace. */
export const UNIQUE_DATA_KEY = 'key';

/** What the webhook reads of a review (admission.k8s.io/v1). */
interface Review {
  request?: { uid?: string; namespace?: string; name?: string; object?: V1ConfigMap };
}

export interface UniqueKeyDecision {
  allowed: boolean;
  /** The ConfigMap already holding the key, when refused. */
  holder?: string;
}

/**
 * The sample webhook's rule (pure), decided from the operator's own cache as a real operator's webhook would: a
 * ConfigMap may not take a `data.key` that another ConfigMap of its namespace in `cached` already has. A shard's
 * cache holds only its own namespaces' objects, so only the owning shard can decide this right.
 */
export function uniqueKey(configMap: V1ConfigMap | undefined, cached: readonly V1ConfigMap[]): UniqueKeyDecision {
  const value = configMap?.data?.[UNIQUE_DATA_KEY];
  if (value === undefined) return { allowed: true };
  const name = configMap?.metadata?.name;
  const holder = cached.find((c) => c.metadata?.name !== name && c.data?.[UNIQUE_DATA_KEY] === value);
  return holder ? { allowed: false, holder: holder.metadata?.name ?? '' } : { allowed: true };
}

/**
 * The sample operator's validating webhook over TLS (`tls.crt`/`tls.key` of `certDir`, as controller-runtime reads
 * them), on every path: each review is decided by `uniqueKey` against the namespace's ConfigMaps in `cache`, and
 * reported as `admission <ns>/<name> shard=<shard> allowed=<bool>`.
 */
export function startSampleWebhook(options: {
  port: number;
  certDir: string;
  shard: string;
  cache: (namespace: string) => readonly V1ConfigMap[];
  out: (line: string) => void;
}): Server {
  const { shard, cache, out } = options;
  const server = createServer({ cert: readFileSync(join(options.certDir, 'tls.crt')), key: readFileSync(join(options.certDir, 'tls.key')) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let review: Review;
      try {
        review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Review;
      } catch {
        res.writeHead(400).end();
        return;
      }
      const request = review.request ?? {};
      const namespace = request.namespace ?? '';
      const name = request.name || request.object?.metadata?.name || '';
      const decision = uniqueKey(request.object, cache(namespace));
      out(`admission ${namespace}/${name} shard=${shard} allowed=${decision.allowed}`);
      const response = {
        uid: request.uid,
        allowed: decision.allowed,
        ...(decision.allowed
          ? {}
          : { status: { code: 409, reason: 'Conflict', message: `data.${UNIQUE_DATA_KEY} is already used by ConfigMap ${namespace}/${decision.holder} (decided by shard ${shard})` } }),
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }));
    });
  });
  server.listen(options.port);
  return server;
}
