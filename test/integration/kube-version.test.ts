import { CoreV1Api } from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

/**
 * The shared bed runs the Kubernetes release CTRLMESH_KUBE_VERSION chose (`npm run test:kube-next` runs v1.37): its
 * API servers say so on /version, and on v1.37 they answer server-side shard selectors (docs/shard-selectors.md).
 */
const info = cluster(0);
const core = kubeConfigFor(info).makeApiClient(CoreV1Api);
const dispatcher = new Agent({ connect: { ca: info.caPem, cert: info.clientCertPem, key: info.clientKeyPem } });

async function get(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const answer = await request(`${info.server}${path}`, { dispatcher });
  return { status: answer.statusCode, body: (await answer.body.json()) as Record<string, unknown> };
}

interface List {
  metadata: { shardInfo?: { selector: string } };
  items: { metadata: { name: string; namespace?: string; uid: string } }[];
}

/** A list through a shard selector: its status, its echo, and the items as `namespace/name`. */
async function list(path: string, shardSelector: string): Promise<{ status: number; echo: unknown; items: string[]; body: Record<string, unknown> }> {
  const { status, body } = await get(`${path}?shardSelector=${encodeURIComponent(shardSelector)}`);
  const answer = body as unknown as List;
  const items = (answer.items ?? []).map((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`).sort();
  return { status, echo: answer.metadata?.shardInfo, items, body };
}

/** 64-bit FNV-1a of a string's UTF-8 bytes: the hash the API server ranges over. */
function fnv1a64(text: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text, 'utf8')) h = ((h ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h;
}
const END = 1n << 64n;
const hex = (n: bigint): string => (n === END ? '0x10000000000000000' : `0x${n.toString(16).padStart(16, '0')}`);
const range = (field: 'namespace' | 'uid', start: bigint, end: bigint): string => `shardRange(object.metadata.${field}, '${hex(start)}', '${hex(end)}')`;
/** The range holding exactly one hash: the value's. */
const exactly = (field: 'namespace' | 'uid', value: string): string => range(field, fnv1a64(value), fnv1a64(value) + 1n);

const version = testbed().kubeVersion;
const shardSelectors = version.startsWith('v1.37.');
const [nsA, nsB] = [uniqueName('shard-a'), uniqueName('shard-b')];

beforeAll(async () => {
  for (const namespace of [nsA, nsB]) {
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'probe' } } });
  }
});
afterAll(async () => {
  await Promise.all([nsA, nsB].map((name) => core.deleteNamespace({ name })));
  await dispatcher.close();
});

describe(`the test bed's kube-apiserver (${version})`, () => {
  it('reports the release it was built from on /version', async () => {
    const { status, body } = await get('/version');
    expect(status).toBe(200);
    const [major, minor] = version.slice(1).split('.');
    expect(body).toMatchObject({ gitVersion: version, major, minor });
  });

  it.runIf(shardSelectors)('filters lists by 64-bit FNV-1a ranges of the namespace and echoes the selector (ShardedListAndWatch on)', async () => {
    const everything = range('namespace', 0n, END);
    const all = await list('/api/v1/configmaps', everything);
    expect(all.status).toBe(200);
    expect(all.echo).toEqual({ selector: everything });
    expect(all.items).toEqual(expect.arrayContaining([`${nsA}/probe`, `${nsB}/probe`]));

    const onlyA = await list('/api/v1/configmaps', exactly('namespace', nsA));
    expect(onlyA.echo).toEqual({ selector: exactly('namespace', nsA) });
    expect(onlyA.items).toEqual([`${nsA}/probe`]);
    const both = `${exactly('namespace', nsA)} || ${exactly('namespace', nsB)}`;
    expect((await list('/api/v1/configmaps', both)).items).toEqual([`${nsA}/probe`, `${nsB}/probe`].sort());
  });

  it.runIf(shardSelectors)('filters by the uid too, and hashes a cluster-scoped object by its empty namespace', async () => {
    const probe = await core.readNamespacedConfigMap({ namespace: nsA, name: 'probe' });
    const uid = probe.metadata?.uid ?? '';
    expect((await list(`/api/v1/namespaces/${nsA}/configmaps`, exactly('uid', uid))).items).toEqual([`${nsA}/probe`]);
    // Namespaces have no namespace: all of them hash as the empty string, FNV-1a's offset basis.
    const namespaces = await list('/api/v1/namespaces', exactly('namespace', ''));
    expect(namespaces.items).toEqual(expect.arrayContaining([`/${nsA}`, `/${nsB}`, '/default']));
    expect((await list('/api/v1/namespaces', exactly('namespace', 'default'))).items).toEqual([]);
  });

  it.runIf(shardSelectors)('refuses bounds that are not 16 hex digits, and terms on two fields', async () => {
    const short = await list('/api/v1/configmaps', "shardRange(object.metadata.namespace, '0x0', '0x10000000000000000')");
    expect(short.status).toBeGreaterThanOrEqual(400);
    expect(String(short.body.message)).toContain('16-digit');
    const mixed = await list('/api/v1/configmaps', `${range('namespace', 0n, END)} || ${range('uid', 0n, END)}`);
    expect(mixed.status).toBeGreaterThanOrEqual(400);
  });

  it.skipIf(shardSelectors)('ignores shard selectors before v1.36: no shardInfo, every object', async () => {
    const { status, echo, items } = await list('/api/v1/configmaps', exactly('namespace', nsA));
    expect(status).toBe(200);
    expect(echo).toBeUndefined();
    expect(items).toEqual(expect.arrayContaining([`${nsA}/probe`, `${nsB}/probe`]));
  });
});
