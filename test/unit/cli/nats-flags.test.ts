import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { natsConfigFromFlags } from '../../../src/cli/commands/nats-flags.js';
import { readBootstrapTokens, readOperatorFile } from '../../../src/cli/commands/flags.js';
import type { CommandContext } from '../../../src/cli/command.js';
import { FileError, UsageError } from '../../../src/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'ctrlmesh-nats-flags-'));
const file = (name: string, text = 'x\n'): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const ctx = (values: CommandContext['values'], env: NodeJS.ProcessEnv = {}): CommandContext => ({ values, env }) as unknown as CommandContext;

describe('the NATS flags', () => {
  it('reads URLs repeated or comma-separated, TLS and creds, flags before environment', () => {
    const ca = file('ca.crt');
    const creds = file('a.creds');
    const config = natsConfigFromFlags(ctx({ nats: ['tls://n1:4222,tls://n2:4222'], 'nats-ca': ca }, { CTRLMESH_NATS_CREDS: creds, CTRLMESH_NATS_URL: 'nats://ignored' }));
    expect(config).toEqual({ servers: ['tls://n1:4222', 'tls://n2:4222'], tls: { caFile: ca }, credentials: { kind: 'creds', file: creds } });
    expect(Object.isFrozen(config)).toBe(true);
    expect(natsConfigFromFlags(ctx({}, { CTRLMESH_NATS_URL: 'nats://127.0.0.1:4222' }))?.servers).toEqual(['nats://127.0.0.1:4222']);
    expect(natsConfigFromFlags(ctx({}))).toBeUndefined();
  });

  it('refuses what cannot be meant, in one line naming the flags', () => {
    const ca = file('ca2.crt');
    const cases: [CommandContext['values'], RegExp][] = [
      [{ nats: ['tls://n:4222'] }, /tls:\/\/ NATS URL needs --nats-ca/],
      [{ nats: ['n'], 'nats-cert': file('c.crt') }, /--nats-cert and --nats-key go together/],
      [{ nats: ['n'], 'nats-cert': file('c2.crt'), 'nats-key': file('k2') }, /--nats-cert needs --nats-ca/],
      [{ nats: ['n'], 'nats-creds': file('x.creds'), 'nats-token-file': file('t') }, /give one of/],
      [{ nats: ['n'], 'nats-user': 'u' }, /--nats-user and --nats-password-file go together/],
      [{ nats: ['n'], 'nats-ca': ca, 'nats-creds': join(dir, 'missing.creds') }, /cannot read the file given to --nats-creds/],
    ];
    for (const [values, message] of cases) expect(() => natsConfigFromFlags(ctx(values))).toThrow(message);
    expect(() => natsConfigFromFlags(ctx({ nats: ['tls://n:4222'] }))).toThrow(UsageError);
  });
});

describe("the hub's bootstrap token file", () => {
  it('binds each token to one cluster', () => {
    expect(readBootstrapTokens(file('tokens', '# comment\ncluster-a  tok-a\n\ncluster-b tok-b\n'))).toEqual([
      { cluster: 'cluster-a', token: 'tok-a' },
      { cluster: 'cluster-b', token: 'tok-b' },
    ]);
  });

  it("gives a cluster the labels of its line's third field", () => {
    expect(readBootstrapTokens(file('labelled', 'prod-a tok-a env=prod,region=eu-west-1\nprod-b tok-b env=\n'))).toEqual([
      { cluster: 'prod-a', token: 'tok-a', labels: { env: 'prod', region: 'eu-west-1' } },
      { cluster: 'prod-b', token: 'tok-b', labels: { env: '' } },
    ]);
    expect(() => readBootstrapTokens(file('bad-labels', 'a tok env\n'))).toThrow(/line 1: labels are KEY=VALUE pairs/);
    expect(() => readBootstrapTokens(file('four', 'a tok env=prod more\n'))).toThrow(/line 1: write "CLUSTER TOKEN"/);
  });

  it('refuses a bare token (the old format) and an empty file, naming the line', () => {
    expect(() => readBootstrapTokens(file('old', 'just-a-token\n'))).toThrow(/line 1: write "CLUSTER TOKEN"/);
    expect(() => readBootstrapTokens(file('empty', '# nothing\n'))).toThrow(FileError);
  });
});

describe("the hub's operator file", () => {
  it('lists each operator with the clusters that may define and span it', () => {
    expect(readOperatorFile(file('operators', '# prod\noperator-prod/prod  prod-a,prod-b\n\nteam-x/op eu-1\n'))).toEqual([
      { operator: 'operator-prod/prod', clusters: ['prod-a', 'prod-b'] },
      { operator: 'team-x/op', clusters: ['eu-1'] },
    ]);
    // An empty file is a hub that plans no operator: meant, for a hub being set up, so not refused.
    expect(readOperatorFile(file('no-operators', '# none yet\n'))).toEqual([]);
  });

  it('refuses a line that is not NAMESPACE/NAME CLUSTER,..., naming it', () => {
    for (const line of ['op prod-a', 'ns/op', 'ns/op a b', '/op a', 'ns/ a', 'a/b/c x']) {
      expect(() => readOperatorFile(file('bad-operators', `${line}\n`))).toThrow(/line 1: write "NAMESPACE\/NAME CLUSTER,..."/);
    }
    expect(() => readOperatorFile(file('bad-clusters', 'ns/op a,,b\n'))).toThrow(/line 1: cluster names are separated by single commas/);
  });
});
