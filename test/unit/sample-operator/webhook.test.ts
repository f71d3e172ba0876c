import type { V1ConfigMap } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { uniqueKey } from '../../../src/sample-operator/webhook.js';

const cm = (name: string, key?: string): V1ConfigMap => ({ metadata: { name, namespace: 'ns' }, ...(key === undefined ? {} : { data: { key } }) });

describe('the sample webhook rule', () => {
  it("refuses a data.key another ConfigMap of the namespace holds in the operator's cache, and nothing else", () => {
    const cache = [cm('a', 'k1'), cm('b')];
    expect(uniqueKey(cm('c', 'k1'), cache)).toEqual({ allowed: false, holder: 'a' });
    expect(uniqueKey(cm('c', 'k2'), cache)).toEqual({ allowed: true });
    expect(uniqueKey(cm('c'), cache)).toEqual({ allowed: true });
    // An update of the holder itself is no conflict.
    expect(uniqueKey(cm('a', 'k1'), cache)).toEqual({ allowed: true });
    // A shard whose cache lacks the holder (not its namespace) decides otherwise: only the owner can answer right.
    expect(uniqueKey(cm('c', 'k1'), [])).toEqual({ allowed: true });
  });
});
