import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseManifests } from '../../../src/api/index.js';
import { describe, expect, it, vi } from 'vitest';
import { run } from '../../../src/cli/run.js';

// version.ts finds package.json relative to dist/; these tests run from the sources and do not need it.
vi.mock('../../../src/cli/commands/version.js', () => ({
  versionCommand: { name: 'version', summary: 'Print the version of ctrlmesh.', usage: '', options: {}, run: async () => 0 },
}));

class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

async function ctrlmeshWithEnv(env: NodeJS.ProcessEnv, ...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new Capture();
  const stderr = new Capture();
  const code = await run([...argv, '--log-level', 'silent'], { stdout, stderr, env, signal: new AbortController().signal });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

const ctrlmesh = (...argv: string[]): ReturnType<typeof ctrlmeshWithEnv> => ctrlmeshWithEnv({}, ...argv);

const dir = mkdtempSync(join(tmpdir(), 'ctrlmesh-cli-'));
const examples = new URL('../api/examples/', import.meta.url).pathname;

describe('ctrlmesh hash', () => {
  it('prints NAMESPACE<TAB>BUCKET with the KusionStack vectors', async () => {
    const r = await ctrlmesh('hash', '--algorithm', 'kusionstack', 'default', 'ns-a', 'kube-system');
    expect(r).toEqual({ code: 0, stdout: 'default\t5\nns-a\t15\nkube-system\t25\n', stderr: '' });
  });
  it('refuses a bad flag with one line and exit 2', async () => {
    const r = await ctrlmesh('hash', '--buckets', '0', 'x');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('ctrlmesh: --buckets must be a whole number from 1 to 65536, not "0"\n');
  });
});

describe('ctrlmesh dev --kube-version', () => {
  it('refuses an unknown version, from the flag or CTRLMESH_KUBE_VERSION, with one line and exit 2 before starting anything', async () => {
    expect(await ctrlmesh('dev', 'tools', '--kube-version', 'v1.99')).toEqual({
      code: 2,
      stdout: '',
      stderr: 'ctrlmesh: --kube-version: unknown Kubernetes version "v1.99"; the test bed runs v1.33 (v1.33.13), v1.37 (v1.37.2)\n',
    });
    const up = await ctrlmeshWithEnv({ CTRLMESH_KUBE_VERSION: '1.99' }, 'dev', 'up', '--dir', join(dir, 'bed'));
    expect(up).toMatchObject({ code: 2, stderr: 'ctrlmesh: CTRLMESH_KUBE_VERSION: unknown Kubernetes version "1.99"; the test bed runs v1.33 (v1.33.13), v1.37 (v1.37.2)\n' });
  });
  it('keeps a real node on the default minor', async () => {
    const r = await ctrlmesh('dev', 'up', '--node', '--kube-version', 'v1.37', '--dir', join(dir, 'bed'));
    expect(r).toMatchObject({ code: 2, stderr: expect.stringContaining('--node runs Kubernetes v1.33 only') });
  });
});

describe('ctrlmesh validate', () => {
  it('exits 0 for the reference examples', async () => {
    const r = await ctrlmesh('validate', '-f', join(examples, 'sharding-config-auto.yaml'), '-f', join(examples, 'circuit-breaker.yaml'));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('ShardingConfig/demo-root: valid');
  });
  it('prints every error as FILE: Kind/name: field.path: reason and exits 1', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: ctrlmesh.kusionstack.io/v1alpha1',
        'kind: ShardingConfig',
        'metadata: {name: bad, namespace: x}',
        'spec:',
        '  webhook: {certDir: /tmp, port: "http"}',
        '  limits:',
        '  - selector: {matchExpressions: [{key: a, operator: In, values: [b]}, {key: a, operator: Maybe}]}',
        '---',
        'apiVersion: v1',
        'kind: ConfigMap',
        'metadata: {name: other}',
        '',
      ].join('\n'),
    );
    const r = await ctrlmesh('validate', '-f', file);
    expect(r.code).toBe(1);
    expect(r.stdout.trim().split('\n')).toEqual([
      `${file}: ShardingConfig/bad: spec.webhook.port: must be an integer, not string "http"`,
      `${file}: ShardingConfig/bad: spec.limits[0].selector.matchExpressions[1].operator: must be one of In, NotIn, Exists, DoesNotExist, not string "Maybe"`,
    ]);
  });
  it('reads JSON as well', async () => {
    const file = join(dir, 'faults.json');
    writeFileSync(file, JSON.stringify({ apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'FaultInjection', metadata: { name: 'f' }, spec: { httpFault: [{ name: 'x', abort: { httpStatus: 503, percent: 101 } }] } }));
    const r = await ctrlmesh('validate', '-f', file);
    expect(r).toEqual({ code: 1, stdout: `${file}: FaultInjection/f: spec.httpFault[0].abort.percent: must be from 0 to 100, not 101\n`, stderr: '' });
  });

  it('leaves out empty documents: a leading or trailing ---, a file of comments', async () => {
    const file = join(dir, 'separators.yaml');
    const example = readFileSync(join(examples, 'circuit-breaker.yaml'), 'utf8');
    writeFileSync(file, `---\n${example}\n---\n# nothing here\n---\n`);
    const r = await ctrlmesh('validate', '-f', file);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).toMatch(/^.*: CircuitBreaker\/[^:]+: valid$/mu);
    const comments = join(dir, 'comments.yaml');
    writeFileSync(comments, '# only a comment\n---\n');
    expect(await ctrlmesh('validate', '-f', comments)).toMatchObject({ code: 0, stdout: '' });
  });
  it('names the line of text that is not YAML, exit 2', async () => {
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, 'kind: ShardingConfig\nmetadata: {name: [unclosed\n');
    const r = await ctrlmesh('validate', '-f', file);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^ctrlmesh: ${file}: is not valid YAML or JSON: .*\\(3:1\\)\\n$`, 'u'));
  });

  it('turns a missing file into a FileError, exit 2', async () => {
    const r = await ctrlmesh('validate', '-f', join(dir, 'missing.yaml'));
    expect(r).toEqual({ code: 2, stdout: '', stderr: `ctrlmesh: ${join(dir, 'missing.yaml')}: cannot read it: no such file\n` });
  });
});

describe('ctrlmesh plan', () => {
  it('prints the assignment and the moves, and takes its own assignment as --previous', async () => {
    const input = join(dir, 'input.json');
    writeFileSync(
      input,
      JSON.stringify({
        hash: { bucketCount: 4 },
        clusters: [{ name: 'a' }, { name: 'b' }],
        weights: [{ cluster: 'a', namespace: 'ns-1', objects: 10 }],
        operators: [{ name: 'ops/root', multicluster: true, shards: [{ name: 's1', homeCluster: 'a' }, { name: 's2', homeCluster: 'b' }] }],
      }),
    );
    const first = await ctrlmesh('plan', '-f', input);
    expect(first.code).toBe(0);
    const out = JSON.parse(first.stdout) as { assignment: unknown; moves: unknown[] };
    expect(out.moves).toHaveLength(8);
    const previous = join(dir, 'previous.json');
    writeFileSync(previous, JSON.stringify(out.assignment));
    const again = JSON.parse((await ctrlmesh('plan', '-f', input, '--previous', previous)).stdout) as { moves: unknown[] };
    expect(again.moves).toEqual([]);
  });
  it('names every problem of a bad input file', async () => {
    const input = join(dir, 'bad-input.json');
    writeFileSync(input, JSON.stringify({ clusters: [{ name: 'a', health: 'Sick' }], weights: [], operators: [{ shards: [] }] }));
    const r = await ctrlmesh('plan', '-f', input);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('clusters[0].health: must be one of Ready, Unknown, Offline, not string "Sick"');
    expect(r.stderr).toContain('operators[0].name: is required');
  });
});

describe('ctrlmesh crds', () => {
  it('prints three CRDs as YAML', async () => {
    const r = await ctrlmesh('crds');
    expect(r.code).toBe(0);
    expect(parseManifests(r.stdout).map((d) => (d as { metadata: { name: string } }).metadata.name)).toEqual([
      'shardingconfigs.ctrlmesh.kusionstack.io',
      'circuitbreakers.ctrlmesh.kusionstack.io',
      'faultinjections.ctrlmesh.kusionstack.io',
    ]);
  });
});

const webhook = ['--webhook-listen', '127.0.0.1:0'];

describe('ctrlmesh agent: the injected proxy flags', () => {
  it('refuses --proxy-image without --proxy-route-signer, saying where the key comes from', async () => {
    const r = await ctrlmesh('agent', '--proxy-image', 'controllermesh:1', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--proxy-image needs --proxy-route-signer: the public key (N...) of the hub's --signing-key");
  });

  it('refuses a route signer that is not a public server nkey', async () => {
    const r = await ctrlmesh('agent', '--proxy-image', 'controllermesh:1', '--proxy-route-signer', 'SNAAAA', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--proxy-route-signer must be a public server nkey (N followed by 55 characters), not "SNAAAA"');
  });

  it('refuses a --proxy-secret that is not a Secret name', async () => {
    const r = await ctrlmesh('agent', '--proxy-image', 'controllermesh:1', '--proxy-route-signer', `N${'A'.repeat(55)}`, '--proxy-secret', 'Proxy_Creds', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--proxy-secret must be a Secret name (lower-case DNS subdomain), not "Proxy_Creds"');
  });

  it('refuses the proxy flags without --proxy-image', async () => {
    const r = await ctrlmesh('agent', '--proxy-secret', 'ctrlmesh-proxy', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('give --proxy-image too');
  });
});

describe('ctrlmesh proxy and hub: the control-plane trust flags', () => {
  it('a proxy following NATS needs the hub key it trusts', async () => {
    const r = await ctrlmesh('proxy', '--nats', 'nats://127.0.0.1:4222', '--operator', 'ns/op', '--shard', 's', '--credentials', 'kubeconfig');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--route-signer is required with --nats: the public key of the hub's --signing-key");
  });

  it('a hub needs its signing key', async () => {
    const tokens = join(dir, 'hub-tokens');
    writeFileSync(tokens, 'cluster-a secret\n');
    const r = await ctrlmesh('hub', '--nats', 'nats://127.0.0.1:4222', '--token-file', tokens);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--signing-key is required (or CTRLMESH_SIGNING_KEY)');
  });
});

describe('ctrlmesh nats-auth creds --role agent', () => {
  it('refuses a cluster name no agent could take, in one line, exit 2', async () => {
    const r = await ctrlmesh('nats-auth', 'creds', '--dir', join(dir, 'no-auth'), '--role', 'agent', '--cluster', 'Ünicode');
    expect(r).toEqual({ code: 2, stdout: '', stderr: expect.stringMatching(/^ctrlmesh: --cluster: cluster "Ünicode" must be a lower-case DNS label .*\n$/u) as unknown });
  });
});

describe('ctrlmesh hub --operator-file', () => {
  it('refuses a missing file or a bad line in one line, exit 2', async () => {
    const tokens = join(dir, 'hub-tokens-operators');
    writeFileSync(tokens, 'cluster-a secret\n');
    const seed = join(dir, 'signing-operators.nk');
    writeFileSync(seed, `SN${'A'.repeat(56)}\n`);
    const hub = (file: string) => ctrlmesh('hub', '--nats', 'nats://127.0.0.1:4222', '--token-file', tokens, '--signing-key', seed, '--operator-file', file);
    const missing = await hub(join(dir, 'no-such-operators'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^ctrlmesh: .*no-such-operators: cannot read the file given to --operator-file: ENOENT\n$/u);
    const operators = join(dir, 'operators');
    writeFileSync(operators, 'ns/op cluster-a\nns/op cluster-a\n');
    expect(await hub(operators)).toEqual({ code: 2, stdout: '', stderr: 'ctrlmesh: operator file: ns/op is listed twice; give it one line with all its clusters\n' });
  });
});

describe('duration flags', () => {
  const usage = async (...argv: string[]): Promise<string> => {
    const r = await ctrlmesh(...argv);
    expect(r.code).toBe(2);
    return r.stderr;
  };

  it('refuse a bare number with one line naming the flag and an example', async () => {
    expect(await usage('hub', '--lease-ttl', '6')).toBe('ctrlmesh: --lease-ttl must be a duration such as 6s or 500ms, not "6"\n');
    expect(await usage('proxy', '--upstream-timeout', '5000')).toBe('ctrlmesh: --upstream-timeout must be a duration such as 30s or 500ms, not "5000"\n');
    expect(await usage('demo', '--refresh', '500')).toContain('--refresh must be a duration such as 1s or 500ms, not "500"');
  });

  it('check the range, in the units of the flag', async () => {
    expect(await usage('hub', '--lease-ttl', '1s')).toBe('ctrlmesh: --lease-ttl must be a duration from 2s to 10m, not "1s"\n');
    expect(await usage('proxy', '--breaker-window', '1h')).toBe('ctrlmesh: --breaker-window must be a duration from 1s to 10m, not "1h"\n');
    expect(await usage('hub', '--proxy-lease', '1500ms')).toBe('ctrlmesh: --proxy-lease must be a whole number of seconds, such as 15s, not "1500ms"\n');
  });

  it('are gone under their old names', async () => {
    for (const flag of ['--upstream-timeout-ms', '--breaker-reset-ms', '--breaker-window-ms', '--lease-margin-ms']) {
      expect(await usage('proxy', flag, '100')).toContain(`Unknown option '${flag}'`);
    }
    expect(await usage('demo', '--refresh-ms', '100')).toContain("Unknown option '--refresh-ms'");
  });

  it('reach the options checks, whose problems are one usage line too', async () => {
    const tokens = join(dir, 'hub-tokens-durations');
    writeFileSync(tokens, 'cluster-a secret\n');
    const seed = join(dir, 'signing.nk');
    writeFileSync(seed, `SN${'A'.repeat(56)}\n`);
    const r = await ctrlmesh('hub', '--nats', 'nats://127.0.0.1:4222', '--token-file', tokens, '--signing-key', seed, '--unknown-after', '1m', '--offline-after', '30s');
    expect(r).toEqual({ code: 2, stdout: '', stderr: 'ctrlmesh: offline-after must be longer than unknown-after\n' });
    const p = await ctrlmesh('proxy', '--route-table', 'table.json', '--credentials', 'kubeconfig', '--listen', '127.0.0.1:7000', '--ops-listen', '127.0.0.1:7000');
    expect(p).toEqual({ code: 2, stdout: '', stderr: 'ctrlmesh: ops-listen and listen must not both be 127.0.0.1:7000\n' });
  });
});
