import { readFileSync } from 'node:fs';
import { loadYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ENABLE_PROXY_LABEL } from '../../../src/agent/index.js';
import { PROXY_API_PORT, PROXY_OPS_PORT, PROXY_WEBHOOK_PORT } from '../../../src/transport/proxy-command.js';

const CHARTS = ['ctrlmesh-hub', 'ctrlmesh-agent', 'ctrlmesh-nats'];
const read = (path: string): string => readFileSync(new URL(`../../../charts/${path}`, import.meta.url), 'utf8');
const values = (chart: string): Record<string, unknown> => loadYaml<Record<string, unknown>>(read(`${chart}/values.yaml`));

// What the templates render is checked by helm and a real API server (test/integration/charts.test.ts); these are
// the defaults and the numbers the templates share with the code.
describe("the charts' NetworkPolicies", () => {
  it.each(CHARTS)('%s ships them, on by default', (chart) => {
    expect(values(chart).networkPolicy).toMatchObject({ enabled: true });
    expect(read(`${chart}/templates/networkpolicy.yaml`)).toMatch(/^\{\{- if \.Values\.networkPolicy\.enabled \}\}$/mu);
  });

  it("admit the injected proxy's webhook and ops ports, which the injector gives it, in the operator namespaces", () => {
    const template = read('ctrlmesh-agent/templates/networkpolicy.yaml');
    const ports = [...template.slice(template.indexOf('range .Values.networkPolicy.operatorNamespaces')).matchAll(/port: (\d+) \}/gu)].map((m) => Number(m[1]));
    expect(ports).toEqual([PROXY_WEBHOOK_PORT, PROXY_OPS_PORT]);
    expect(ports).not.toContain(PROXY_API_PORT);
    expect(template).toContain(`matchLabels: { ${ENABLE_PROXY_LABEL}: "true" }`);
    expect(read('ctrlmesh-nats/templates/networkpolicy.yaml')).toContain(`matchLabels: { ${ENABLE_PROXY_LABEL}: "true" }`);
  });

  it("keep NATS's monitoring port off its Service by default, and the hub's /status on loopback", () => {
    expect(values('ctrlmesh-nats').service).toMatchObject({ exposeMonitor: false });
    expect(values('ctrlmesh-hub').status).toEqual({ port: 9465, token: { existingSecret: '', key: 'token' } });
  });
});
