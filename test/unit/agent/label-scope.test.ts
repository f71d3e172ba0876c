import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { labelScope } from '../../../src/agent/related.js';
import { webhookConfiguration, type WebhookRegistration } from '../../../src/agent/webhook.js';
import type { ObjectLabels, ShardingConfigModel } from '../../../src/api/index.js';
import type { HashAlgorithm } from '../../../src/sharding/index.js';

/** A hand-written config relating to one core resource. */
const config = (name: string, resource: string, objectLabels: ObjectLabels): ShardingConfigModel => ({
  kind: 'ShardingConfig',
  name,
  namespace: 'op',
  selector: {},
  limits: [{ relateResources: [{ apiGroups: [''], resources: [resource] }], selector: {} }],
  objectLabels,
  objectSharding: [],
  unshardedWrites: [],
});

describe('labelScope', () => {
  const scope = (objectLabels: ObjectLabels, serverShardSelectors: boolean, algorithm: HashAlgorithm = 'fnv-range') =>
    labelScope({ configs: [config('c', 'configmaps', objectLabels)], algorithm, serverShardSelectors });
  const configmaps = [{ group: '', resource: 'configmaps' }];

  it.each([
    // [objectLabels, server filters, objects labelled, namespaces labelled]
    ['Auto', false, true, true],
    ['Auto', true, false, false],
    ['Always', false, true, true],
    ['Always', true, true, true],
    // The proxy filters objects itself; namespace labels stay for the cluster's other operators.
    ['Never', false, false, true],
    ['Never', true, false, false],
  ] as const)('objectLabels %s, server shard selectors %s: objects %s, namespaces %s', (objectLabels, server, objects, namespaces) => {
    expect(scope(objectLabels, server)).toEqual({ namespaces, resources: objects ? configmaps : [] });
  });

  it('labels everything under kusionstack, whose buckets are no hash ranges, unless Never', () => {
    expect(scope('Auto', true, 'kusionstack')).toEqual({ namespaces: true, resources: configmaps });
    expect(scope('Never', true, 'kusionstack')).toEqual({ namespaces: true, resources: [] });
  });

  it('narrows per config, and one config asking Always keeps namespaces labelled', () => {
    const configs = [config('a', 'configmaps', 'Auto'), config('b', 'services', 'Always'), config('c', 'secrets', 'Never')];
    expect(labelScope({ configs, algorithm: 'fnv-range', serverShardSelectors: true })).toEqual({ namespaces: true, resources: [{ group: '', resource: 'services' }] });
    expect(labelScope({ configs, algorithm: 'fnv-range', serverShardSelectors: false })).toEqual({
      namespaces: true,
      resources: [
        { group: '', resource: 'configmaps' },
        { group: '', resource: 'services' },
      ],
    });
  });

  it('labels namespaces in a cluster without configs unless its server filters (they serve operators configured elsewhere)', () => {
    expect(labelScope({ configs: [], algorithm: 'fnv-range', serverShardSelectors: false })).toEqual({ namespaces: true, resources: [] });
    expect(labelScope({ configs: [], algorithm: 'fnv-range', serverShardSelectors: true })).toEqual({ namespaces: false, resources: [] });
  });
});

describe('webhookConfiguration', () => {
  const registration = (overrides: Partial<WebhookRegistration>): WebhookRegistration => ({
    kc: new KubeConfig(),
    cluster: 'a',
    target: { url: 'https://127.0.0.1:9443/mutate' },
    caPem: 'ca',
    skip: ['kube-system'],
    namespaces: true,
    resources: [{ group: '', resource: 'configmaps' }],
    inject: false,
    ...overrides,
  });
  const names = (overrides: Partial<WebhookRegistration>): (string | undefined)[] =>
    (webhookConfiguration(registration(overrides)).webhooks ?? []).map((w) => w.name);

  it('registers the labelling webhooks only for what is labelled', () => {
    expect(names({})).toEqual(['namespaces.ctrlmesh.kusionstack.io', 'objects.ctrlmesh.kusionstack.io']);
    expect(names({ namespaces: false })).toEqual(['objects.ctrlmesh.kusionstack.io']);
    expect(names({ resources: [] })).toEqual(['namespaces.ctrlmesh.kusionstack.io']);
    expect(names({ namespaces: false, resources: [] })).toEqual([]);
  });

  it('keeps sidecar injection whatever is labelled', () => {
    expect(names({ namespaces: false, resources: [], inject: true })).toEqual(['pods.ctrlmesh.kusionstack.io']);
  });

  it('lists exactly the labelled resources in the objects rule', () => {
    const config = webhookConfiguration(registration({ resources: [{ group: '', resource: 'services' }, { group: 'apps', resource: 'deployments' }] }));
    const objects = config.webhooks?.find((w) => w.name === 'objects.ctrlmesh.kusionstack.io');
    expect(objects?.rules?.map((r) => [r.apiGroups, r.resources])).toEqual([
      [[''], ['services']],
      [['apps'], ['deployments']],
    ]);
  });
});
