import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FileRuleSource } from '../../../src/proxy/rule-files/file-rule-source.js';
import type { RuleSet } from '../../../src/proxy/rules/index.js';

const logger = pino({ level: 'silent' });

/** A CircuitBreaker whose one intercept rule refuses every call to `host`. */
function breaker(host: string): string {
  return [
    'apiVersion: ctrlmesh.kusionstack.io/v1alpha1',
    'kind: CircuitBreaker',
    'metadata: { name: demo, namespace: operator-demo }',
    'spec:',
    '  selector: { matchLabels: { app: demo } }',
    '  trafficInterceptRules:',
    '  - name: block',
    '    interceptType: Blacklist',
    '    contentType: Normal',
    '    contents: ["https://' + host + '/*"]',
    '',
  ].join('\n');
}

const refused = (rules: RuleSet, host: string): boolean =>
  rules.circuit.check({ kind: 'rest', method: 'GET', host, path: '/', url: `https://${host}/x` }, 0).action === 'deny';

describe('FileRuleSource', () => {
  let dir: string;
  let source: FileRuleSource | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-rules-'));
  });

  afterEach(async () => {
    await source?.stop();
    source = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it('reports the rules before start resolves, then the whole set again when a file changes', async () => {
    const file = join(dir, 'rules.yaml');
    await writeFile(file, breaker('a.example'));
    const seen: RuleSet[] = [];
    source = new FileRuleSource({ paths: [file], logger, pollIntervalMs: 20 });
    await source.start({ onRules: (rules) => seen.push(rules) });
    expect(seen).toHaveLength(1);
    expect(refused(seen[0]!, 'a.example')).toBe(true);

    await writeFile(file, breaker('b.example.other'));
    await vi.waitFor(() => expect(seen).toHaveLength(2), { timeout: 5_000 });
    expect(refused(seen[1]!, 'a.example')).toBe(false);
    expect(refused(seen[1]!, 'b.example.other')).toBe(true);
  });

  it('keeps the current rules when a changed file cannot be used, and refuses to start on one', async () => {
    const file = join(dir, 'rules.yaml');
    await writeFile(file, breaker('a.example'));
    const seen: RuleSet[] = [];
    const errors: unknown[] = [];
    const watched = pino({ level: 'error' }, { write: (line: string) => errors.push(line) });
    source = new FileRuleSource({ paths: [file], logger: watched, pollIntervalMs: 20 });
    await source.start({ onRules: (rules) => seen.push(rules) });
    await writeFile(file, 'kind: ShardingConfig\n');
    await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), { timeout: 5_000 });
    expect(seen).toHaveLength(1);

    const broken = new FileRuleSource({ paths: [file], logger });
    await expect(broken.start({ onRules: () => undefined })).rejects.toMatchObject({ code: 'CM_FILE' });
    await broken.stop();
  });
});
