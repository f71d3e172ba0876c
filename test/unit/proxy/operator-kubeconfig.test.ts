import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createKubeconfigWriter, operatorKubeconfig, parseRouteTable } from '../../../src/proxy/index.js';
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

describe('createKubeconfigWriter', () => {
  it('writes the kubeconfig of each table whose clusters change, and only then', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-kubeconfig-'));
    const path = join(dir, 'sub', 'kubeconfig');
    const logger = pino({ level: 'silent' });
    const write = createKubeconfigWriter({ path, proxyUrl: 'http://127.0.0.1:5443', logger });
    const settle = () => new Promise((resolve) => setTimeout(resolve, 50));
    try {
      write(routeTableFixture({ clusters: [clusterFixture('a', [1])] }));
      await settle();
      expect(JSON.parse(await readFile(path, 'utf8')).contexts.map((c: { name: string }) => c.name)).toEqual(['a']);
      const before = (await stat(path)).mtimeMs;
      // A bucket move leaves the kubeconfig as it was: no rewrite.
      write(routeTableFixture({ version: 2, clusters: [clusterFixture('a', [2])] }));
      await settle();
      expect((await stat(path)).mtimeMs).toBe(before);
      write(routeTableFixture({ version: 3, clusters: ['a', 'b'].map((name) => clusterFixture(name, [])) }));
      await settle();
      expect(JSON.parse(await readFile(path, 'utf8')).contexts.map((c: { name: string }) => c.name)).toEqual(['a', 'b']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
