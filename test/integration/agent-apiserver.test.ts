import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { startApiServer, type ApiServerHandle } from '../../src/dev/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import { GROUP, apply, bootstrapTokens, ensureNamespace, eventually, observe, privateNats, routeTables, runAgent, runHub } from './control-fixture.js';
import { kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

describe('an agent whose API server goes away and comes back (private API server)', () => {
  const name = uniqueName('private');
  let dir: string;
  let api: ApiServerHandle;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agent: AgentHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-agent-api-'));
    api = await startApiServer({ etcd: testbed().etcd, name, dir });
    nats = await privateNats();
    hub = await runHub(nats.nats, 'hub-api', { tokens: bootstrapTokens(name) });
    agent = await runAgent({ registryName: name, bed: api, nats: nats.nats });
    nc = await observe(nats.nats);
  });

  afterAll(async () => {
    await nc?.close();
    await agent?.stop();
    await hub?.stop();
    await nats?.cleanup();
    await api?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const health = (): string | undefined => hub.status().clusters.find((c) => c.name === name)?.health;

  it('reports Unknown while its API server is down, then resynchronises: labels, reports and route tables resume', async () => {
    const kc = kubeConfigFor(api);
    await eventually(() => expect(health()).toBe('Ready'));
    await ensureNamespace(kc, 'ns-before');
    await eventually(async () => {
      const ns = await kc.makeApiClient(CoreV1Api).readNamespace({ name: 'ns-before' });
      expect(ns.metadata?.labels?.['ctrlmesh.kusionstack.io/control']).toBe('true');
    });

    await api.stop();
    await eventually(() => expect(health()).toBe('Unknown'), 30_000);
    await api.start();
    await eventually(() => expect(health()).toBe('Ready'), 30_000);

    // The webhook is not registered for these (no related resources yet), so this label comes from the agent's
    // own pass, which runs again once its informers have re-listed.
    await ensureNamespace(kc, 'operator-after');
    await eventually(async () => {
      const ns = await kc.makeApiClient(CoreV1Api).readNamespace({ name: 'operator-after' });
      expect(ns.metadata?.labels?.['ctrlmesh.kusionstack.io/namespace']).toBe('operator-after');
    });
    await eventually(() =>
      apply(kc, {
        apiVersion: `${GROUP}/v1alpha1`,
        kind: 'ShardingConfig',
        metadata: { name: 'after', namespace: 'operator-after' },
        spec: { selector: { matchLabels: { app: 'after' } }, limits: [] },
      }),
    );
    await eventually(async () => {
      const tables = await routeTables(nc, 'operator-after/after');
      expect(tables.map((t) => t.shard)).toEqual([`${name}/after`]);
      expect(tables[0]?.clusters[0]?.buckets).toHaveLength(32);
    });
  });
});
