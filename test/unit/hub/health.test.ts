import { describe, expect, it } from 'vitest';
import { clusterHealth } from '../../../src/hub/health.js';

const t = { unknownAfterMs: 10, offlineAfterMs: 30 };

describe('clusterHealth', () => {
  it('follows heartbeats', () => {
    expect(clusterHealth({ at: 100, apiServerReachable: true }, 109, t, 0)).toBe('Ready');
    expect(clusterHealth({ at: 100, apiServerReachable: true }, 110, t, 0)).toBe('Unknown');
    expect(clusterHealth({ at: 100, apiServerReachable: true }, 130, t, 0)).toBe('Offline');
    expect(clusterHealth({ at: 100, apiServerReachable: false }, 101, t, 0)).toBe('Unknown');
  });

  it('counts the silence of a cluster never heard from since the hub started listening: Unknown, then Offline', () => {
    expect(clusterHealth(undefined, 100, t, 100)).toBe('Unknown');
    expect(clusterHealth(undefined, 129, t, 100)).toBe('Unknown');
    expect(clusterHealth(undefined, 130, t, 100)).toBe('Offline');
  });
});
