import { describe, expect, it } from 'vitest';
import { operatorKubeconfig, parseRouteTable } from '../../../src/proxy/index.js';
import type { RouteTable } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

const table: RouteTable = routeTableFixture({ homeCluster: 'b', hashAlgorithm: 'fnv', clusters: ['a', 'b'].map((name) => clusterFixture(name, [])) });

describe('operatorKubeconfig', () => {
  it('has a context per cluster, the home one current at the plain proxy URL, and no credentials', () => {
    const config = JSON.parse(operatorKubeconfig(table, 'http://127.0.0.1:5443'));
    expect(config['current-context']).toBe('b');
    expect(config.clusters.map((c: { name: string; cluster: { server: string } }) => [c.name, c.cluster.server])).toEqual([
      ['b', 'http://127.0.0.1:5443'],
      ['a', 'http://127.0.0.1:5443/clusters/a'],
    ]);
    expect(config.users).toEqual([{ name: 'ctrlmesh-proxy', user: {} }]);
  });
});

describe('parseRouteTable', () => {
  it('names the file and the fields at fault', () => {
    expect(() => parseRouteTable('{"schema":1}', 'table.json')).toThrow(/^table\.json: not a valid route table: /);
    expect(() => parseRouteTable('nope', 'table.json')).toThrow(/^table\.json: not JSON/);
    expect(() => parseRouteTable(JSON.stringify({ ...table, issuedAt: 'yesterday' }), 't.json')).toThrow(/\/issuedAt/);
    expect(parseRouteTable(JSON.stringify(table), 't.json').homeCluster).toBe('b');
  });
});
