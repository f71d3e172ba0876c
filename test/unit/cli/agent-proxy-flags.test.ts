import { Writable } from 'node:stream';
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

/** `ctrlmesh agent ARGS`: these cases fail on the flags, before the agent reads a file or connects. */
async function agent(...argv: string[]): Promise<{ code: number; stderr: string }> {
  const stdout = new Capture();
  const stderr = new Capture();
  const code = await run(['agent', ...argv, '--log-level', 'silent'], { stdout, stderr, env: {}, signal: new AbortController().signal });
  return { code, stderr: stderr.text };
}

const webhook = ['--webhook-listen', '127.0.0.1:0'];

describe('ctrlmesh agent: the injected proxy flags', () => {
  it('refuses --proxy-image without --proxy-route-signer, saying where the key comes from', async () => {
    const r = await agent('--proxy-image', 'controllermesh:1', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--proxy-image needs --proxy-route-signer: the public key (N...) of the hub's --signing-key");
  });

  it('refuses a route signer that is not a public server nkey', async () => {
    const r = await agent('--proxy-image', 'controllermesh:1', '--proxy-route-signer', 'SNAAAA', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--proxy-route-signer must be a public server nkey (N followed by 55 characters), not "SNAAAA"');
  });

  it('refuses a --proxy-secret that is not a Secret name', async () => {
    const r = await agent('--proxy-image', 'controllermesh:1', '--proxy-route-signer', `N${'A'.repeat(55)}`, '--proxy-secret', 'Proxy_Creds', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--proxy-secret must be a Secret name (lower-case DNS subdomain), not "Proxy_Creds"');
  });

  it('refuses the proxy flags without --proxy-image', async () => {
    const r = await agent('--proxy-secret', 'ctrlmesh-proxy', ...webhook);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('give --proxy-image too');
  });
});
