import type { KvEntry } from '@nats-io/kv';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Fleet } from '../../../src/hub/fleet.js';
import { Keys, MESSAGE_SCHEMA_VERSION, Messages, encodeMessage, type ClusterRecord } from '../../../src/transport/index.js';
import { clusterReport } from './report-fixture.js';

const logger = pino({ level: 'silent' });
const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const record = (name: string): ClusterRecord => ({
  schema: MESSAGE_SCHEMA_VERSION,
  cluster: { name, labels: {}, server: 'https://127.0.0.1:1', caPem: PEM },
  registeredAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
});
let revision = 0;
const put = (key: string, value: Uint8Array): KvEntry => ({ key, value, revision: ++revision, operation: 'PUT' }) as KvEntry;
const del = (key: string): KvEntry => ({ key, value: new Uint8Array(), revision: ++revision, operation: 'DEL' }) as KvEntry;
const registered = (name: string): KvEntry => put(Keys.cluster(name), encodeMessage(Messages.clusterRecord, record(name)));
const removal = (key: string, cluster: string): KvEntry =>
  put(key, encodeMessage(Messages.clusterRemoval, { schema: MESSAGE_SCHEMA_VERSION, cluster, removedAt: '2026-01-02T00:00:00.000Z' }));

describe('Fleet: clusters removed from the fleet', () => {
  it('drops a removed cluster and its report, whichever of its record and its removal is read first', () => {
    for (const order of ['record first', 'removal first'] as const) {
      const fleet = new Fleet(logger, []);
      fleet.applyClusterEntry(registered('a'));
      const entries = [registered('b'), removal(Keys.removal('b'), 'b')];
      for (const entry of order === 'record first' ? entries : entries.reverse()) {
        if (entry.key.startsWith('removed.')) fleet.applyStateEntry(entry);
        else fleet.applyClusterEntry(entry);
      }
      fleet.applyStateEntry(put(Keys.report('b'), encodeMessage(Messages.clusterReport, clusterReport('b', []))));
      fleet.recordRegistration(record('b'));
      fleet.recordReport(clusterReport('b', []), 99);
      expect([...fleet.clusters.keys()]).toEqual(['a']);
      expect(fleet.reports.has('b')).toBe(false);
      expect([...fleet.removed]).toEqual(['b']);
    }
  });

  it('readmits a cluster when its removal is deleted: it is back once it registers again', () => {
    const fleet = new Fleet(logger, []);
    fleet.applyStateEntry(removal(Keys.removal('b'), 'b'));
    fleet.applyStateEntry(del(Keys.removal('b')));
    expect(fleet.removed.size).toBe(0);
    fleet.applyClusterEntry(registered('b'));
    expect([...fleet.clusters.keys()]).toEqual(['b']);
  });

  it("fails closed: any value under a cluster's removal key removes it, until readmit deletes the key", () => {
    // Another cluster's removal, and a value that is no removal at all (what a hub's answer aimed at the key would
    // write, were answers not sent to inboxes only).
    const values = [removal(Keys.removal('a'), 'b'), put(Keys.removal('a'), new TextEncoder().encode('{"schema":1,"ok":false,"error":"refused"}'))];
    for (const entry of values) {
      const fleet = new Fleet(logger, []);
      fleet.applyClusterEntry(registered('a'));
      fleet.applyStateEntry(entry);
      expect([...fleet.clusters.keys()]).toEqual([]);
      expect([...fleet.removed]).toEqual(['a']);
      fleet.applyStateEntry(del(Keys.removal('a')));
      expect(fleet.removed.size).toBe(0);
    }
  });
});
