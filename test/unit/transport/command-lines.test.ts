import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../../src/api/index.js';
import type { Command } from '../../../src/cli/command.js';
import { agentCommand } from '../../../src/cli/commands/agent.js';
import { hubCommand } from '../../../src/cli/commands/hub.js';
import { proxyCommand } from '../../../src/cli/commands/proxy.js';
import { agentCommandArgs, hubCommandArgs, type AgentCommandOptions, type HubCommandOptions } from '../../../src/transport/command-lines.js';
import { PROXY_API_PORT, PROXY_OPS_PORT, PROXY_WEBHOOK_PORT, proxyCommandArgs, type ProxyCommandOptions } from '../../../src/transport/proxy-command.js';

const SIGNER = `N${'A'.repeat(55)}`;

/** Parses argv as the command does: its own option table, unknown flags and positionals refused. */
function parseCommandArgs(cmd: Command, argv: string[]): Record<string, unknown> {
  const [name, ...rest] = argv;
  expect(name).toBe(cmd.name);
  const options = Object.fromEntries(Object.entries(cmd.options).map(([k, { description: _d, valueName: _v, ...spec }]) => [k, spec]));
  const parsed = parseArgs({ args: rest, options, strict: true, allowPositionals: false });
  return { ...parsed.values };
}

const NATS = { nats: ['tls://nats-0:4222', 'tls://nats-1:4222'], natsCa: '/etc/ctrlmesh/nats-ca.crt', natsCreds: '/etc/ctrlmesh/nats.creds' };
const NATS_FLAGS = { nats: NATS.nats, 'nats-ca': NATS.natsCa, 'nats-creds': NATS.natsCreds };

describe('proxyCommandArgs', () => {
  it('builds a command line the proxy command parses back to the same values, every option set', () => {
    const options: Required<ProxyCommandOptions> = {
      ...NATS,
      routeSigners: [SIGNER, `N${'B'.repeat(55)}`],
      operator: 'ops/demo',
      shard: 'eu-west-1/demo-0',
      listen: `127.0.0.1:${PROXY_API_PORT}`,
      opsListen: `0.0.0.0:${PROXY_OPS_PORT}`,
      store: '/var/run/ctrlmesh/route-table.json',
      writeKubeconfig: '/var/run/ctrlmesh/kubeconfig',
      credentials: '/etc/ctrlmesh/credentials/kubeconfig',
      meshSecret: 'ctrlmesh-proxy',
      egressListen: '127.0.0.1:5442',
      rules: ['breaker.yaml', 'faults.yaml'],
      podLabels: '/etc/podinfo/labels',
      podName: 'demo-0-pod',
      leaseMarginMs: 1_500,
      webhookListen: `0.0.0.0:${PROXY_WEBHOOK_PORT}`,
      webhookPort: 9443,
      webhookCertDir: '/tmp/k8s-webhook-server/serving-certs',
      webhookTimeoutMs: 5_000,
    };
    expect(parseCommandArgs(proxyCommand, proxyCommandArgs(options))).toEqual({
      ...NATS_FLAGS,
      'route-signer': options.routeSigners,
      operator: options.operator,
      shard: options.shard,
      listen: options.listen,
      'ops-listen': options.opsListen,
      store: options.store,
      'write-kubeconfig': options.writeKubeconfig,
      credentials: options.credentials,
      'mesh-secret': options.meshSecret,
      'egress-listen': options.egressListen,
      rules: options.rules,
      'pod-labels': options.podLabels,
      'pod-name': options.podName,
      'lease-margin': '1500ms',
      'webhook-listen': options.webhookListen,
      'webhook-port': '9443',
      'webhook-cert-dir': options.webhookCertDir,
      'webhook-timeout': '5s',
    });
  });

  it('leaves out the options not given', () => {
    const argv = proxyCommandArgs({ nats: ['nats://127.0.0.1:4222'], routeSigners: [SIGNER], operator: 'ns/op', shard: 'a/s', credentials: 'kubeconfig' });
    expect(argv).toEqual(['proxy', '--nats=nats://127.0.0.1:4222', `--route-signer=${SIGNER}`, '--operator=ns/op', '--shard=a/s', '--credentials=kubeconfig']);
    expect(parseCommandArgs(proxyCommand, argv)).toEqual({ nats: ['nats://127.0.0.1:4222'], 'route-signer': [SIGNER], operator: 'ns/op', shard: 'a/s', credentials: 'kubeconfig' });
  });
});

describe('hubCommandArgs', () => {
  it('builds a command line the hub command parses back, durations written with their units', () => {
    const options: Required<HubCommandOptions> = {
      ...NATS,
      tokenFile: '/etc/ctrlmesh/tokens',
      signingKey: '/etc/ctrlmesh/route-signing.nk',
      agentIssuer: '/etc/ctrlmesh/issuer.nk',
      replicas: 3,
      listen: '0.0.0.0:9464',
      identity: 'hub-0',
      leaseTtlMs: 6_000,
      unknownAfterMs: 15_000,
      offlineAfterMs: 90_000,
      proxyLeaseSeconds: 5,
      grantMarginMs: 500,
    };
    const values = parseCommandArgs(hubCommand, hubCommandArgs(options));
    expect(values).toEqual({
      ...NATS_FLAGS,
      'token-file': options.tokenFile,
      'signing-key': options.signingKey,
      'agent-issuer': options.agentIssuer,
      replicas: '3',
      listen: options.listen,
      identity: options.identity,
      'lease-ttl': '6s',
      'unknown-after': '15s',
      'offline-after': '1m30s',
      'proxy-lease': '5s',
      'grant-margin': '500ms',
    });
    expect(parseDuration(values['offline-after'] as string)).toBe(options.offlineAfterMs);
  });

  it('leaves out the options not given', () => {
    expect(hubCommandArgs({ nats: ['nats://127.0.0.1:4222'], tokenFile: 't', signingKey: 'k' })).toEqual([
      'hub',
      '--nats=nats://127.0.0.1:4222',
      '--token-file=t',
      '--signing-key=k',
    ]);
  });
});

describe('agentCommandArgs', () => {
  it('builds a command line the agent command parses back to the same values, every option set', () => {
    const options: Required<AgentCommandOptions> = {
      ...NATS,
      cluster: 'eu-west-1',
      kubeconfig: '/etc/ctrlmesh/kubeconfig',
      tokenFile: '/etc/ctrlmesh/token',
      labels: { region: 'eu-west', tier: 'gold' },
      hashAlgorithm: 'kusionstack',
      advertiseServer: 'https://api.example:6443',
      listen: '0.0.0.0:9465',
      webhookListen: '0.0.0.0:9443',
      webhookUrl: 'https://agent.example/mutate',
      webhookService: 'ctrlmesh-system/agent:443',
      webhookCert: 'tls.crt',
      webhookKey: 'tls.key',
      webhookCa: 'ca.crt',
      proxyImage: 'controllermesh:1',
      proxyRouteSigners: [SIGNER],
      proxySecret: 'ctrlmesh-proxy',
      labelQps: 20,
    };
    expect(parseCommandArgs(agentCommand, agentCommandArgs(options))).toEqual({
      ...NATS_FLAGS,
      cluster: options.cluster,
      kubeconfig: options.kubeconfig,
      'token-file': options.tokenFile,
      label: ['region=eu-west', 'tier=gold'],
      'hash-algorithm': options.hashAlgorithm,
      'advertise-server': options.advertiseServer,
      listen: options.listen,
      'webhook-listen': options.webhookListen,
      'webhook-url': options.webhookUrl,
      'webhook-service': options.webhookService,
      'webhook-cert': options.webhookCert,
      'webhook-key': options.webhookKey,
      'webhook-ca': options.webhookCa,
      'proxy-image': options.proxyImage,
      'proxy-route-signer': options.proxyRouteSigners,
      'proxy-secret': options.proxySecret,
      'label-qps': '20',
    });
  });

  it('leaves out the options not given', () => {
    expect(agentCommandArgs({ cluster: 'a', nats: ['nats://127.0.0.1:4222'], tokenFile: 't' })).toEqual(['agent', '--cluster=a', '--nats=nats://127.0.0.1:4222', '--token-file=t']);
  });
});
