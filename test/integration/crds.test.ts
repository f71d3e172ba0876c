import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiException, ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, loadAllYaml, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_GROUP, buildCrds, KINDS } from '../../src/api/index.js';
import { compileSelector, mergeQuery } from '../../src/sharding/index.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const EXAMPLES = new URL('../unit/api/examples/', import.meta.url).pathname;
const kc = kubeConfigFor(cluster(0));
const crdApi = kc.makeApiClient(ApiextensionsV1Api);
const core = kc.makeApiClient(CoreV1Api);
const objects = kc.makeApiClient(CustomObjectsApi);
const namespace = uniqueName('crds');

type Manifest = { kind: string; metadata: { name: string; namespace?: string }; spec: unknown };

function examples(): [string, Manifest][] {
  return readdirSync(EXAMPLES)
    .sort()
    .map((file) => [file, loadAllYaml(readFileSync(join(EXAMPLES, file), 'utf8'))[0] as Manifest]);
}

function pluralOf(kind: string): string {
  const def = KINDS.find((k) => k.kind === kind);
  if (!def) throw new Error(`no kind ${kind}`);
  return def.plural;
}

/** Server-side create of a ControllerMesh object in the test namespace. */
function create(manifest: Manifest): Promise<unknown> {
  return objects.createNamespacedCustomObject({
    group: API_GROUP,
    version: 'v1alpha1',
    namespace,
    plural: pluralOf(manifest.kind),
    body: { ...manifest, metadata: { ...manifest.metadata, namespace } },
  });
}

async function refusal(call: Promise<unknown>): Promise<{ code: number; body: string }> {
  try {
    await call;
  } catch (err) {
    if (err instanceof ApiException) return { code: err.code, body: String(err.body) };
    throw err;
  }
  throw new Error('the API server accepted what it should refuse');
}

/** Creates or replaces a CRD (the shared bed may already hold it from another file), then waits for Established. */
async function install(crd: V1CustomResourceDefinition): Promise<V1CustomResourceDefinition> {
  const name = crd.metadata?.name as string;
  try {
    await crdApi.createCustomResourceDefinition({ body: crd });
  } catch (err) {
    if (!(err instanceof ApiException) || err.code !== 409) throw err;
    const current = await crdApi.readCustomResourceDefinition({ name });
    await crdApi.replaceCustomResourceDefinition({ name, body: { ...crd, metadata: { ...crd.metadata, resourceVersion: current.metadata?.resourceVersion } } });
  }
  for (let i = 0; i < 100; i++) {
    const read = await crdApi.readCustomResourceDefinition({ name });
    if (read.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return read;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`CRD ${name} did not become Established within 10 s`);
}

describe('generated CRDs on a real kube-apiserver', () => {
  const installed: V1CustomResourceDefinition[] = [];

  beforeAll(async () => {
    for (const crd of buildCrds()) installed.push(await install(crd as unknown as V1CustomResourceDefinition));
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  afterAll(async () => {
    await core.deleteNamespace({ name: namespace });
  });

  it('accepts all three as structural schemas, with their short names', () => {
    for (const crd of installed) {
      const types = crd.status?.conditions?.filter((c) => c.status === 'True').map((c) => c.type);
      expect(types).toContain('NamesAccepted');
      expect(crd.status?.conditions?.find((c) => c.type === 'NonStructuralSchema')).toBeUndefined();
    }
    expect(installed.map((c) => c.status?.acceptedNames?.shortNames)).toEqual([['shard'], ['cbk'], ['fj']]);
  });

  it.each(examples())('creates the example %s and keeps every field (nothing pruned)', async (_file, manifest) => {
    await create(manifest);
    const where = { group: API_GROUP, version: 'v1alpha1', namespace, plural: pluralOf(manifest.kind), name: manifest.metadata.name };
    const read = (await objects.getNamespacedCustomObject(where)) as Manifest;
    expect(read.spec).toEqual(manifest.spec);
    // Two examples share a name (the same shard in both limit forms).
    await objects.deleteNamespacedCustomObject(where);
  });

  it('refuses a field of the wrong type, naming the field', async () => {
    const [, manual] = examples().find(([f]) => f === 'sharding-config-manual.yaml') as [string, Manifest];
    const bad = structuredClone(manual) as Manifest & { spec: { webhook: { port: unknown } } };
    bad.metadata.name = 'wrong-type';
    bad.spec.webhook.port = 'http';
    const { code, body } = await refusal(create(bad));
    expect(code).toBe(422);
    expect(body).toContain('spec.webhook.port');
    expect(body).toContain('must be of type integer');
  });

  it('refuses an unknown selector operator, naming the field path', async () => {
    const [, manual] = examples().find(([f]) => f === 'sharding-config-manual.yaml') as [string, Manifest];
    const bad = structuredClone(manual) as Manifest & { spec: { limits: { selector: { matchExpressions: { operator: string }[] } }[] } };
    bad.metadata.name = 'bad-operator';
    bad.spec.limits[0]!.selector.matchExpressions[0]!.operator = 'Maybe';
    const { code, body } = await refusal(create(bad));
    expect(code).toBe(422);
    expect(body).toContain('spec.limits[0].selector.matchExpressions[0].operator');
  });

  it('accepts the selectors the proxy renders, including the one that matches nothing', async () => {
    const shard = compileSelector({ matchExpressions: [{ key: 'ctrlmesh.kusionstack.io/sharding-hash', operator: 'In', values: ['1', '2'] }] });
    for (const client of ['ctrlmesh.kusionstack.io/sharding-hash in (3)', 'app=demo,tier notin (web),!legacy']) {
      const { query } = mergeQuery(shard, client);
      const list = await core.listNamespacedConfigMap({ namespace, labelSelector: query });
      expect(list.items).toEqual([]);
    }
  });
});
