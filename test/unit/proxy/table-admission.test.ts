import { describe, expect, it } from 'vitest';
import { MAX_VERSION_AHEAD_MS, tableRefusal } from '../../../src/proxy/routes/table-admission.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

describe('which tables a proxy applies', () => {
  const now = 1_700_000_000_000;

  it('applies an https table with a CA, whatever its step, up to a day ahead of the clock', () => {
    expect(tableRefusal(routeTableFixture({ version: 11 }), now)).toBeUndefined();
    // Clock-based versions jump by the time elapsed between tables: a proxy that was away a year still applies.
    expect(tableRefusal(routeTableFixture({ version: now }), now)).toBeUndefined();
    expect(tableRefusal(routeTableFixture({ version: now + MAX_VERSION_AHEAD_MS }), now)).toBeUndefined();
  });

  it('refuses plain http, a missing CA, a server that is no URL, and a version from the future that would pin it', () => {
    const refused = [
      routeTableFixture({ clusters: [clusterFixture('a', [1], { server: 'http://a.example:8080' })] }),
      routeTableFixture({ clusters: [clusterFixture('a', [1], { caPem: '' })] }),
      routeTableFixture({ clusters: [clusterFixture('a', [1], { server: 'a.example:6443' })] }),
      routeTableFixture({ version: now + MAX_VERSION_AHEAD_MS + 1 }),
      routeTableFixture({ version: Number.MAX_SAFE_INTEGER }),
    ];
    for (const table of refused) expect(tableRefusal(table, now)).toEqual(expect.any(String));
    // Judged against the clock, not against the applied table (with nothing applied yet it is refused too).
    expect(tableRefusal(routeTableFixture({ version: Number.MAX_SAFE_INTEGER }), now)).toContain('ahead of this proxy');
  });
});
