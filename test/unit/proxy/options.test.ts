import { describe, expect, it } from 'vitest';
import { PROXY_DEFAULTS, parseProxyConfig } from '../../../src/proxy/index.js';

describe("the proxy's configuration", () => {
  it('takes the defaults as they are and freezes a copy', () => {
    const result = parseProxyConfig(PROXY_DEFAULTS);
    if (!result.ok) throw new Error(result.problems.join('; '));
    expect(result.options).toEqual(PROXY_DEFAULTS);
    expect(Object.isFrozen(result.options.breaker)).toBe(true);
  });

  it('names each field out of range, then listeners that would collide', () => {
    const shape = parseProxyConfig({ ...PROXY_DEFAULTS, breaker: { ...PROXY_DEFAULTS.breaker, errorThresholdPercentage: 0 }, lease: {} });
    expect(shape.ok ? [] : shape.problems).toEqual(['breaker.errorThresholdPercentage: must be at least 1 and at most 100, not number 0', 'lease.marginMs: is required']);
    const clash = parseProxyConfig({ ...PROXY_DEFAULTS, egress: PROXY_DEFAULTS.api, ops: { host: '127.0.0.1', port: 0 } });
    expect(clash.ok ? [] : clash.problems).toEqual(['egress-listen and listen must not both be 127.0.0.1:5443']);
  });
});
