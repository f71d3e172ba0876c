import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { natsClientConfig, resolveTool, startNats, type NatsHandle } from '../../src/dev/index.js';
import { connectNats, watchKv, type NatsLink, type Watch } from '../../src/transport/index.js';
import { eventually } from './control-fixture.js';

// watchKv against a real nats-server of its own (the unit test covers what needs no server): resuming after the
// last revision seen, the server restarting, and a bucket deleted and created again under a running watch.

const BUCKET = 'kvwatch-test';
const STREAM_CHECK_MS = 300;

interface Seen {
  key: string;
  revision: number;
  operation: string;
  value: string;
}

describe('watchKv (real nats-server)', () => {
  let dir: string;
  let nats: NatsHandle;
  let link: NatsLink;
  let warnings: string[];
  const watches: Watch[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-kv-watch-'));
    const binary = (await resolveTool('nats-server')).path;
    // Plain TCP and no auth: this file is about JetStream KV semantics, not the bus's security.
    nats = await startNats({ dir, binary, security: 'open' });
    warnings = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push((JSON.parse(line) as { msg: string }).msg) });
    link = await connectNats({ config: await natsClientConfig(nats, { role: 'hub' }), name: 'kv-watch-test', logger, reconnectWaitMs: 100 });
  });
  afterAll(async () => {
    await link?.close();
    await nats?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  let kv: KV;
  beforeEach(async () => {
    kv = await new Kvm(link.js).create(BUCKET, { history: 1 });
    warnings.length = 0;
  });
  afterEach(async () => {
    for (const w of watches.splice(0)) w.stop();
    await (await jetstreamManager(link.nc)).streams.delete(`KV_${BUCKET}`).catch(() => undefined);
  });

  function watch(key: string | string[] = '>') {
    const seen: Seen[] = [];
    let current = 0;
    const handle = watchKv({
      link,
      open: async () => {
        const opened = await new Kvm(link.js).open(BUCKET);
        await opened.status();
        return opened;
      },
      key,
      logger: pino({ level: 'silent' }),
      onEntry: (entry: KvEntry) => seen.push({ key: entry.key, revision: entry.revision, operation: entry.operation, value: entry.string() }),
      onCurrent: () => (current += 1),
      retryMs: 200,
      streamCheckMs: STREAM_CHECK_MS,
    });
    watches.push(handle);
    return { handle, seen, current: () => current };
  }

  const revisions = (seen: Seen[]): number[] => seen.map((s) => s.revision);

  it('delivers the current values in revision order, says when they are all in, then each change once', async () => {
    await kv.put('a', '1');
    await kv.put('b', '2');
    const w = watch();
    await eventually(() => expect(w.current()).toBe(1));
    expect(w.seen.map((s) => `${s.key}=${s.value}`)).toEqual(['a=1', 'b=2']);
    await kv.put('a', '3');
    await kv.delete('b');
    await eventually(() => expect(w.seen).toHaveLength(4));
    expect(w.seen.slice(2).map((s) => `${s.operation} ${s.key}`)).toEqual(['PUT a', 'DEL b']);
    expect(revisions(w.seen)).toEqual([...revisions(w.seen)].sort((x, y) => x - y));
    expect(new Set(revisions(w.seen)).size).toBe(4);
  });

  it('says an empty bucket is current too', async () => {
    const w = watch();
    await eventually(() => expect(w.current()).toBe(1));
    expect(w.seen).toEqual([]);
  });

  it('restart() resumes after the last revision seen: nothing missed, nothing repeated', async () => {
    const w = watch();
    await eventually(() => expect(w.current()).toBe(1));
    // One key per write: with history 1 a rewritten key drops its older revisions, which no watch could deliver.
    for (let i = 0; i < 20; i += 1) {
      await kv.put(`k${i}`, String(i));
      if (i % 4 === 0) w.handle.restart();
    }
    await eventually(() => expect(w.seen).toHaveLength(20));
    expect(w.seen.map((s) => s.value)).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
    expect(new Set(revisions(w.seen)).size).toBe(20);
  });

  it('survives the server restarting: changes made after it returns arrive, none twice', async () => {
    await kv.put('a', 'before');
    const w = watch();
    await eventually(() => expect(w.seen).toHaveLength(1));
    await nats.stop();
    await nats.start();
    await eventually(() => expect(link.state()).toBe('connected'));
    await eventually(async () => {
      await new Kvm(link.js).open(BUCKET).then((k) => k.put('a', 'after'));
    });
    await eventually(() => expect(w.seen.map((s) => s.value)).toContain('after'));
    expect(new Set(revisions(w.seen)).size).toBe(w.seen.length);
    expect(w.seen.map((s) => s.value).filter((v) => v === 'before')).toHaveLength(1);
    // Current again after resuming.
    await eventually(() => expect(w.current()).toBeGreaterThanOrEqual(2));
  });

  it('reads a bucket deleted and created again from the start, though its revisions start over', async () => {
    for (let i = 0; i < 5; i += 1) await kv.put('a', `old-${i}`);
    const w = watch();
    await eventually(() => expect(w.seen.map((s) => s.value)).toContain('old-4'));
    await (await jetstreamManager(link.nc)).streams.delete(`KV_${BUCKET}`);
    const again = await new Kvm(link.js).create(BUCKET, { history: 1 });
    // Revision 1 of the new stream: a watch resuming after revision 5 would never see it.
    await again.put('a', 'new-1');
    await eventually(() => expect(w.seen.map((s) => s.value)).toContain('new-1'), 10 * STREAM_CHECK_MS + 5_000);
    expect(w.seen.at(-1)).toMatchObject({ key: 'a', revision: 1, value: 'new-1' });
  });
});
