import { describe, expect, it } from 'vitest';
import { AGENT_DEFAULTS, AgentOptionsSchema, agentOptionProblems, parseAgentOptions, type AgentOptions } from '../../../src/agent/index.js';

const valid: AgentOptions = {
  ...AGENT_DEFAULTS,
  cluster: 'eu-west-1',
  clusterLabels: { region: 'eu-west' },
  nats: { servers: ['tls://nats.example:4222'], tls: { caFile: '/ca.crt' } },
  token: 'a-token',
  hash: { algorithm: 'fnv' },
};

describe("the agent's options", () => {
  it('accepts usable options', () => {
    expect(agentOptionProblems(valid)).toEqual([]);
  });

  it('names each option a user has to fix', () => {
    const problems = agentOptionProblems({
      ...valid,
      cluster: 'EU_West',
      token: ' ',
      clusterLabels: { 'bad key!': 'x' },
      advertisedServer: 'http://api.example:6443',
      reportRepeatMs: 100,
    });
    expect(problems).toHaveLength(5);
    expect(problems.join('\n')).toMatch(/cluster "EU_West"[\s\S]*token[\s\S]*bad key![\s\S]*https:\/\/[\s\S]*repeat/);
  });

  it("refuses a proxy Secret name that leaves no room for a shard's (<proxy-secret>.<cluster>.<shard>, at most 253 characters)", () => {
    const webhook = { host: '127.0.0.1', port: 0 };
    const sidecar = (secretName: string): AgentOptions['sidecar'] => ({ image: 'cm:1', routeSigners: [`N${'A'.repeat(55)}`], secretName });
    expect(agentOptionProblems({ ...valid, webhook, sidecar: sidecar('p'.repeat(241)) })).toEqual([]);
    expect(agentOptionProblems({ ...valid, webhook, sidecar: sidecar('p'.repeat(242)) })).toEqual([expect.stringContaining('leave no room for a shard in its Secret')]);
  });
});

describe('parseAgentOptions', () => {
  it('returns usable options deeply frozen', () => {
    const result = parseAgentOptions({ ...valid, webhook: { host: '127.0.0.1', port: 0, target: { service: { namespace: 'ns', name: 'agent', port: 443 } } } });
    if (!result.ok) throw new Error(result.problems.join('; '));
    const { options } = result;
    expect(Object.isFrozen(options)).toBe(true);
    expect(Object.isFrozen(options.nats.servers)).toBe(true);
    expect(Object.isFrozen(options.webhook?.target)).toBe(true);
    expect(Object.isFrozen(valid.nats)).toBe(false);
  });

  it('reports the shape first, with field paths, and the rules between fields after', () => {
    const shape = parseAgentOptions({ ...valid, heartbeatMs: 10, listen: { host: '', port: 70_000 }, extra: 1 });
    expect(shape.ok).toBe(false);
    expect(shape.ok ? [] : shape.problems).toEqual([
      `extra: unknown field; allowed here: ${Object.keys(AgentOptionsSchema.properties).join(', ')}`,
      'heartbeatMs: must be at least 100 and at most 600000, not number 10',
      'listen.host: must not be empty',
      'listen.port: must be at least 0 and at most 65535, not number 70000',
    ]);
    const rules = parseAgentOptions({ ...valid, sidecar: { image: 'cm:1', routeSigners: [`N${'A'.repeat(55)}`], secretName: 'ctrlmesh-proxy' } });
    expect(rules.ok ? [] : rules.problems).toEqual(['proxy-image needs the webhook (webhook-listen): the injected proxy comes with it']);
  });
});
