import { describe, expect, it } from 'vitest';
import { clusterHealth } from '../../../src/hub/health.js';

const t = { unknownAfterMs: 10, offlineAfterMs: 30 };

describe('clusterHealth', () => {
  it('follows heartbeats', () => {
    expect(clusterHealth(undefined, 100, t)).toBe('Unknown');
    expect(clusterHealth({ at: 100, apiServerReachable: true }, 109, t)).toBe('Ready');
    expect(clusterHealth({ at: 100, apiServerReachable: true }, 110, t)).toBe('Unknown');
    expect(clusterHealth({ at: 100, apiServerReachable: true }, 130, t)).toBe('Offline');
    expect(clusterHealth({ at: 100, apiServerReachable: false }, 101, t)).toBe('Unknown');
  });
});
