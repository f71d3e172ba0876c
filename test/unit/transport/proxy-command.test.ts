import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { proxyCommand } from '../../../src/cli/commands/proxy.js';
import { PROXY_API_PORT, PROXY_OPS_PORT, proxyCommandArgs, type ProxyCommandOptions } from '../../../src/transport/proxy-command.js';

const SIGNER = `N${'A'.repeat(55)}`;

/** Parses argv as `ctrlmesh proxy` does: its own option table, unknown flags and positionals refused. */
function parseProxyArgs(argv: string[]): Record<string, unknown> {
  const [command, ...rest] = argv;
  expect(command).toBe(proxyCommand.name);
  const options = Object.fromEntries(Object.entries(proxyCommand.options ?? {}).map(([k, { description: _d, valueName: _v, ...spec }]) => [k, spec]));
  const parsed = parseArgs({ args: rest, options, strict: true, allowPositionals: false });
  return { ...parsed.values };
}

describe('proxyCommandArgs', () => {
  it('builds a command line the proxy command parses back to the same values, every option set', () => {
    const options: Required<ProxyCommandOptions> = {
      nats: ['tls://nats-0:4222', 'tls://nats-1:4222'],
      natsCa: '/etc/ctrlmesh/credentials/nats-ca.crt',
      natsCreds: '/etc/ctrlmesh/credentials/nats.creds',
      routeSigners: [SIGNER, `N${'B'.repeat(55)}`],
      operator: 'ops/demo',
      shard: 'eu-west-1/demo-0',
      listen: `127.0.0.1:${PROXY_API_PORT}`,
      opsListen: `0.0.0.0:${PROXY_OPS_PORT}`,
      store: '/var/run/ctrlmesh/route-table.json',
      writeKubeconfig: '/var/run/ctrlmesh/kubeconfig',
      credentials: '/etc/ctrlmesh/credentials/kubeconfig',
      egressListen: '127.0.0.1:5442',
      rules: ['breaker.yaml', 'faults.yaml'],
    };
    expect(parseProxyArgs(proxyCommandArgs(options))).toEqual({
      nats: options.nats,
      'nats-ca': options.natsCa,
      'nats-creds': options.natsCreds,
      'route-signer': options.routeSigners,
      operator: options.operator,
      shard: options.shard,
      listen: options.listen,
      'ops-listen': options.opsListen,
      store: options.store,
      'write-kubeconfig': options.writeKubeconfig,
      credentials: options.credentials,
      'egress-listen': options.egressListen,
      rules: options.rules,
    });
  });

  it('leaves out the options not given', () => {
    const argv = proxyCommandArgs({ nats: ['nats://127.0.0.1:4222'], routeSigners: [SIGNER], operator: 'ns/op', shard: 'a/s', credentials: 'kubeconfig' });
    expect(argv).toEqual(['proxy', '--nats=nats://127.0.0.1:4222', `--route-signer=${SIGNER}`, '--operator=ns/op', '--shard=a/s', '--credentials=kubeconfig']);
    expect(parseProxyArgs(argv)).toEqual({ nats: ['nats://127.0.0.1:4222'], 'route-signer': [SIGNER], operator: 'ns/op', shard: 'a/s', credentials: 'kubeconfig' });
  });
});
