import { describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { AGENT_DEFAULTS, agentOptionProblems, type AgentOptions } from '../../../src/agent/index.js';

const valid: AgentOptions = {
  ...AGENT_DEFAULTS,
  cluster: 'eu-west-1',
  clusterLabels: { region: 'eu-west' },
  kc: new KubeConfig(),
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
});
