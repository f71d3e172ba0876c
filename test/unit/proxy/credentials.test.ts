import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileError } from '../../../src/errors.js';
import { loadCredentials } from '../../../src/proxy/upstream/credentials.js';

const b64 = (text: string): string => Buffer.from(text).toString('base64');

describe('loadCredentials', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-credentials-'));
    await mkdir(join(dir, 'conf'));
  });
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  async function kubeconfig(text: string): Promise<string> {
    const path = join(dir, 'conf', 'kubeconfig');
    await writeFile(path, text);
    return path;
  }

  it('reads each context\'s user: inline data, files relative to the kubeconfig, a token or a token file', async () => {
    await writeFile(join(dir, 'conf', 'b.crt'), 'CERT B');
    await writeFile(join(dir, 'conf', 'b.key'), 'KEY B');
    await writeFile(join(dir, 'token'), 'secret-from-file\n');
    const path = await kubeconfig(`
apiVersion: v1
kind: Config
contexts:
  - name: a
    context: { cluster: a, user: ua }
  - name: b
    context: { cluster: b, user: ub }
  - name: c
    context: { cluster: c, user: uc }
  - name: d
    context: { cluster: d, user: ud }
users:
  - name: ua
    user: { client-certificate-data: ${b64('CERT A')}, client-key-data: ${b64('KEY A')} }
  - name: ub
    user: { client-certificate: b.crt, client-key: b.key }
  - name: uc
    user: { token: secret-inline }
  - name: ud
    user: { tokenFile: ../token }
  - name: ua
    user: { token: the-second-ua-is-never-read }
`);
    const credentials = loadCredentials(path);
    expect(Object.fromEntries(credentials)).toEqual({
      a: { certPem: 'CERT A', keyPem: 'KEY A' },
      b: { certPem: 'CERT B', keyPem: 'KEY B' },
      c: { token: 'secret-inline' },
      d: { token: 'secret-from-file' },
    });
  });

  it('names the file and what is wrong with it, never a secret', async () => {
    const cases: [string, RegExp][] = [
      ['contexts: [: nope', /not a readable kubeconfig/],
      ['- a list\n- not a kubeconfig', /not a YAML mapping/],
      ['contexts:\n  - context: { user: u }\nusers: []', /contexts\[0\]\.name is missing/],
      ['contexts:\n  - name: a\n    context: { user: ghost }\nusers:\n  - name: u\n    user: { token: t0ps3cret }', /context "a" names user "ghost"/],
      ['contexts:\n  - name: a\n    context: { user: u }\nusers:\n  - name: u\n    user: { client-certificate: missing.crt }', /user "u": cannot read its certificate, key or token/],
    ];
    for (const [text, message] of cases) {
      const path = await kubeconfig(text);
      let thrown: unknown;
      try {
        loadCredentials(path);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(FileError);
      expect((thrown as Error).message).toMatch(message);
      expect((thrown as Error).message).toContain(path);
      expect((thrown as Error).message).not.toContain('t0ps3cret');
    }
  });
});
