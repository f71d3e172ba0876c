import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { deadline } from '../../../src/runtime/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('deadline', () => {
  it('fires after a garbage collection even when only its listeners hold it (the agent renewal that stalled in CI)', async () => {
    let fired = 0;
    for (let i = 0; i < 100; i++) deadline(new AbortController().signal, 100).signal.addEventListener('abort', () => fired++, { once: true });
    gc();
    await pause(20);
    gc();
    await pause(200);
    expect(fired).toBe(100);
  });

  it('aborts with its parent, with the parent reason, and at once when the parent already has', () => {
    const parent = new AbortController();
    const d = deadline(parent.signal, 60_000);
    parent.abort(new Error('stopping'));
    expect(d.signal.aborted).toBe(true);
    expect((d.signal.reason as Error).message).toBe('stopping');
    expect(deadline(parent.signal, 60_000).signal.aborted).toBe(true);
  });

  it('times out with a TimeoutError, and a cleared one never aborts', async () => {
    const parent = new AbortController();
    const d = deadline(parent.signal, 10);
    const cleared = deadline(parent.signal, 10);
    cleared.clear();
    await pause(50);
    expect((d.signal.reason as DOMException).name).toBe('TimeoutError');
    expect(cleared.signal.aborted).toBe(false);
    parent.abort();
    expect(cleared.signal.aborted).toBe(false);
  });
});
