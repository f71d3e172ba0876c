import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KvWatchEntry } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { observe } from './control-fixture.js';
import { testbed, uniqueName } from './helpers/testbed.js';

describe('the shared test bed: NATS with JetStream', () => {
  it('puts, watches and deletes a key in a KV bucket', async () => {
    const nc = await observe(testbed().nats);
    try {
      const bucket = uniqueName('bed');
      const kv = await new Kvm(nc).create(bucket);
      const watch = await kv.watch({ key: 'shard.0' });
      const seen: Pick<KvWatchEntry, 'operation' | 'key'>[] = [];
      const values: string[] = [];
      const watched = (async () => {
        for await (const entry of watch) {
          seen.push({ operation: entry.operation, key: entry.key });
          values.push(entry.string());
          if (entry.operation === 'DEL') break;
        }
      })();

      await kv.put('shard.0', 'cluster-a');
      expect((await kv.get('shard.0'))?.string()).toBe('cluster-a');
      await kv.delete('shard.0');
      await watched;

      expect(seen).toEqual([
        { operation: 'PUT', key: 'shard.0' },
        { operation: 'DEL', key: 'shard.0' },
      ]);
      expect(values[0]).toBe('cluster-a');
      // The bucket is a JetStream stream underneath; removing it leaves the shared server clean.
      const jsm = await jetstreamManager(nc);
      expect((await jsm.streams.info(`KV_${bucket}`)).config.name).toBe(`KV_${bucket}`);
      await kv.destroy();
    } finally {
      await nc.close();
    }
  });
});
