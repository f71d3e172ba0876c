import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import type { RouteTable } from '../../src/transport/index.js';
import { apply, bootstrapTokens, deleteShardingConfigs, ensureNamespace, eventually, handWrittenConfig, observe, privateNats, routeTables, runAgent, runHub, security } from './control-fixture.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const run = promisify(execFile);
const NS = 'operator-removal';
const OPERATOR = `${NS}/rm`;
const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';

/** Units each shard's table grants, by shard. */
function granted(tables: readonly RouteTable[]): Record<string, string[]> {
  return Object.fromEntries(tables.map((t) => [t.shard, t.clusters.flatMap((c) => c.buckets.map((b) => `${c.name}:${b}`))]));
}

describe('removing a member cluster from the fleet (ctrlmesh clusters remove, readmit)', () => {
  const a = uniqueName('rm-a');
  const b = uniqueName('rm-b');
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  const agents = new Map<string, AgentHandle>();
  let nc: NatsConnection;

  /** The ctrlmesh CLI as an administrator runs it, with the hub's NATS identity. */
  const clusters = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const { caFile, auth } = security(nats.nats);
    const argv = ['dist/src/cli/main.js', 'clusters', ...args, '--nats', nats.nats.url, '--nats-ca', caFile, '--nats-creds', auth.hubCreds, '--log-level', 'error'];
    try {
      const { stdout, stderr } = await run(process.execPath, argv);
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
    }
  };
  const startAgent = async (name: string, bed: number): Promise<void> => {
    agents.set(name, await runAgent({ registryName: name, bed: cluster(bed), nats: nats.nats, webhook: undefined }));
  };

  beforeAll(async () => {
    nats = await privateNats();
    hub = await runHub(nats.nats, 'hub-removal', { tokens: bootstrapTokens(a, b), proxyLeaseSeconds: 1, grantMarginMs: 500 });
    await startAgent(a, 0);
    await startAgent(b, 1);
    nc = await observe(nats.nats);
    for (const bed of [0, 1]) {
      const kc = kubeConfigFor(cluster(bed));
      await ensureNamespace(kc, NS);
      await eventually(() => apply(kc, handWrittenConfig(NS, 'rm', ['0', '1'], HASH)));
    }
  });

  afterAll(async () => {
    for (const bed of [0, 1]) await deleteShardingConfigs(kubeConfigFor(cluster(bed)), NS, 'rm');
    await nc?.close();
    for (const agent of agents.values()) await agent.stop();
    await hub?.stop();
    await nats?.cleanup();
  });

  it('plans without a removed cluster, refuses its agent until readmitted, then takes it back', async () => {
    const both = { [`${a}/rm`]: [`${a}:0`, `${a}:1`], [`${b}/rm`]: [`${b}:0`, `${b}:1`] };
    await eventually(async () => expect(granted(await routeTables(nc, OPERATOR))).toEqual(both), 30_000);

    const removed = await clusters('remove', b);
    expect(removed).toMatchObject({ code: 0, stdout: expect.stringContaining(`cluster ${b} removed`) });
    // By effect: b's shard owns nothing any more, and no table spans b; the hub lists b as removed.
    await eventually(async () => {
      const tables = await routeTables(nc, OPERATOR);
      expect(granted(tables)[`${a}/rm`]).toEqual([`${a}:0`, `${a}:1`]);
      expect(granted(tables)[`${b}/rm`] ?? []).toEqual([]);
      for (const t of tables) expect(t.clusters.map((c) => c.name)).not.toContain(b);
    }, 20_000);
    expect(hub.status().clusters.map((c) => c.name)).toEqual([a]);
    expect(hub.status().removedClusters).toEqual([b]);

    // Its agent, still running, reports in vain; started again, it is refused with its token.
    await agents.get(b)?.stop();
    agents.delete(b);
    await expect(startAgent(b, 1)).rejects.toThrow(/removed from the fleet; `ctrlmesh clusters readmit/u);
    expect(hub.status().clusters.map((c) => c.name)).toEqual([a]);
    // Removing it again, or readmitting a cluster never removed: one line, exit 2.
    expect(await clusters('remove', b)).toMatchObject({ code: 2, stderr: `ctrlmesh: cluster "${b}" is not registered (ctrlmesh status lists the clusters)\n` });
    expect(await clusters('readmit', a)).toMatchObject({ code: 2, stderr: `ctrlmesh: cluster "${a}" was not removed\n` });

    expect(await clusters('readmit', b)).toMatchObject({ code: 0, stdout: expect.stringContaining(`cluster ${b} readmitted`) });
    await eventually(() => expect(hub.status().removedClusters).toEqual([]));
    await startAgent(b, 1);
    await eventually(async () => expect(granted(await routeTables(nc, OPERATOR))).toEqual(both), 30_000);
  });
});
