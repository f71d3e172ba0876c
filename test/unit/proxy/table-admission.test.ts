import { describe, expect, it } from 'vitest';
import { MAX_VERSION_STEP, tableRefusal } from '../../../src/proxy/table-admission.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

describe('which tables a proxy applies', () => {
  const applied = routeTableFixture({ version: 10 });

  it('applies an https table with a CA, a step ahead', () => {
    expect(tableRefusal(routeTableFixture({ version: 11 }), applied)).toBeUndefined();
    expect(tableRefusal(routeTableFixture({ version: 10 + MAX_VERSION_STEP }), applied)).toBeUndefined();
  });

  it('refuses plain http, a missing CA, a server that is no URL, and a version that would pin it', () => {
    const refused = [
      routeTableFixture({ clusters: [clusterFixture('a', [1], { server: 'http://a.example:8080' })] }),
      routeTableFixture({ clusters: [clusterFixture('a', [1], { caPem: '' })] }),
      routeTableFixture({ clusters: [clusterFixture('a', [1], { server: 'a.example:6443' })] }),
      routeTableFixture({ version: Number.MAX_SAFE_INTEGER }),
    ];
    for (const table of refused) expect(tableRefusal(table, applied)).toEqual(expect.any(String));
    // With nothing applied yet there is no mark to jump from.
    expect(tableRefusal(routeTableFixture({ version: Number.MAX_SAFE_INTEGER }), undefined)).toBeUndefined();
  });
});
