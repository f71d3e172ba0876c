import { readFileSync } from 'node:fs';
import { loadYaml } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { MAX_POD_LABELS_BYTES, parsePodLabels, unquoteGo } from '../../../src/proxy/rule-files/pod-labels.js';
import {
  LiveRules,
  compileRule,
  mergeRules,
  selectsPod,
  type CompiledRule,
  type MergeInput,
  type PodLabels,
  type PodLabelsSource,
  type RuleSet,
  type RuleSource,
  type RuleSourceHandlers,
} from '../../../src/proxy/rules/index.js';
import type { ResourceCall } from '../../../src/proxy/rules/matchers.js';
import type { RouteTable, TableRule } from '../../../src/transport/index.js';
import { routeTableFixture } from './route-table-fixture.js';

const EXAMPLES = new URL('../api/examples/', import.meta.url);
type Manifest = { kind: 'CircuitBreaker' | 'FaultInjection'; metadata: { name: string; namespace: string }; spec: Record<string, unknown> };
const example = (file: string): Manifest => loadYaml(readFileSync(new URL(file, EXAMPLES), 'utf8'));
const breaker = example('circuit-breaker.yaml');
const faults = example('fault-injection.yaml');
const podDelete: ResourceCall = { kind: 'resource', verb: 'delete', group: '', resource: 'pods', namespace: 'ns-a' };
const podPatch: ResourceCall = { ...podDelete, verb: 'patch' };

/** A table rule as the hub puts it in a table: the manifest and its selector. */
function tableRule(manifest: Manifest, generation = 1): TableRule {
  const selector = manifest.spec.selector as TableRule['selector'];
  return {
    kind: manifest.kind,
    namespace: manifest.metadata.namespace,
    name: manifest.metadata.name,
    generation,
    ...(selector ? { selector } : {}),
    manifest: { apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', ...manifest, metadata: { ...manifest.metadata, generation } },
  };
}

/** A rate limit of pod deletes, `burst` of them before the breaker opens (417). */
function deletesLimit(name: string, burst: number, selector?: unknown): Manifest {
  return {
    kind: 'CircuitBreaker',
    metadata: { name, namespace: 'operator-demo' },
    spec: {
      ...(selector ? { selector } : {}),
      rateLimitings: [
        { name: `${name}-deletes`, resourceRules: [{ apiGroups: [''], resources: ['pods'], verbs: ['delete'], namespaces: ['*'] }], bucket: { burst, interval: '1h', limit: 1 }, triggerPolicy: 'Normal', recoverPolicy: { type: 'Manual' } },
      ],
    },
  };
}

const merge = (input: Partial<MergeInput>) => mergeRules({ files: [], table: undefined, podLabels: undefined, compiled: new Map(), now: 0, ...input });
const allowed = (rules: RuleSet, n: number): number => Array.from({ length: n }, () => rules.circuit.check(podDelete, 0).action).filter((a) => a === 'allow').length;
const names = (rules: RuleSet): string[] => rules.inForce.map((r) => `${r.source}:${r.kind}/${r.name}@${r.generation}`);
const APP = { app: 'operator-demo' };

describe('mergeRules: which rules are in force on a proxy', () => {
  it('selects the table rules whose selector matches the pod; an empty selector matches every pod', () => {
    const table = [tableRule(breaker), tableRule(faults), tableRule(deletesLimit('everyone', 5)), tableRule(deletesLimit('empty', 5, {}))];
    expect(names(merge({ table, podLabels: APP }).rules)).toEqual([
      'cluster:CircuitBreaker/demo-breaker@1',
      'cluster:FaultInjection/demo-faults@1',
      'cluster:CircuitBreaker/everyone@1',
      'cluster:CircuitBreaker/empty@1',
    ]);
    expect(names(merge({ table, podLabels: { app: 'another' } }).rules)).toEqual(['cluster:CircuitBreaker/everyone@1', 'cluster:CircuitBreaker/empty@1']);
    // Without the pod's labels a selector cannot be judged: only the rules without one apply.
    expect(names(merge({ table }).rules)).toEqual(['cluster:CircuitBreaker/everyone@1', 'cluster:CircuitBreaker/empty@1']);
    expect(selectsPod({ matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['x'] }] }, undefined)).toBe(false);
    expect(selectsPod({ matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['x'] }] }, {})).toBe(true);
  });

  it('names the table rules in force for the acknowledgement, in table order', () => {
    const merged = merge({ table: [tableRule(breaker, 4), tableRule(faults, 2)], podLabels: APP });
    expect(merged.applied).toEqual([
      { kind: 'CircuitBreaker', namespace: 'operator-demo', name: 'demo-breaker', generation: 4 },
      { kind: 'FaultInjection', namespace: 'operator-demo', name: 'demo-faults', generation: 2 },
    ]);
    // The example's rules mean what they meant: the 11th pod delete finds the breaker open.
    expect(allowed(merged.rules, 11)).toBe(10);
    expect(merged.rules.faults.plan(podPatch, new Date(0), () => 0.1).delayMs).toBe(200);
  });

  it('lets a file rule replace the cluster rule of the same kind and name, and adds file rules first', () => {
    const file = compileRule({ kind: 'CircuitBreaker', name: 'demo-breaker', namespace: 'operator-demo', spec: deletesLimit('x', 2).spec }, 0, 'file', 0);
    const extra = compileRule({ kind: 'FaultInjection', name: 'local-faults', namespace: 'default', spec: { httpFault: [] } }, 0, 'file', 0);
    const merged = merge({ files: [file, extra], table: [tableRule(breaker), tableRule(faults)], podLabels: APP });
    expect(names(merged.rules)).toEqual(['file:CircuitBreaker/demo-breaker@0', 'file:FaultInjection/local-faults@0', 'cluster:FaultInjection/demo-faults@1']);
    expect(merged.overridden.map((r) => r.name)).toEqual(['demo-breaker']);
    expect(merged.applied.map((r) => r.name)).toEqual(['demo-faults']);
    expect(allowed(merged.rules, 5)).toBe(2);
  });

  it('keeps a rule state while its generation is unchanged, across tables and other rules; a new generation starts fresh', () => {
    const first = merge({ table: [tableRule(deletesLimit('limit', 3))] });
    expect(allowed(first.rules, 2)).toBe(2);
    // Another table: a rule added beside it, the same generation of this one.
    const second = merge({ table: [tableRule(faults), tableRule(deletesLimit('limit', 3))], podLabels: APP, compiled: first.compiled });
    expect(second.rules.inForce.find((r) => r.name === 'limit')).toBe(first.rules.inForce[0]);
    expect(allowed(second.rules, 3)).toBe(1);
    // Open now (Manual recovery): it stays open through an unchanged generation ...
    const third = merge({ table: [tableRule(deletesLimit('limit', 3))], compiled: second.compiled });
    expect(third.rules.circuit.check(podDelete, 0)).toMatchObject({ action: 'deny', code: 417 });
    // ... and a new generation (an edited rule) starts with a full bucket.
    const edited = merge({ table: [tableRule(deletesLimit('limit', 4), 2)], compiled: third.compiled });
    expect(allowed(edited.rules, 5)).toBe(4);
    expect(edited.compiled.size).toBe(1);
  });

  it('refuses a table rule its own validation refuses, naming the field, and applies the others', () => {
    const bad = { ...faults, metadata: { name: 'bad', namespace: 'operator-demo' }, spec: { httpFault: [{ name: 'x', delay: { fixedDelay: '1s', percent: '150' } }] } };
    const renamed = { ...tableRule(faults), name: 'other-name' };
    const merged = merge({ table: [tableRule(bad as Manifest), renamed, tableRule(breaker)], podLabels: APP });
    expect(merged.refused.map((r) => r.reason)).toEqual([
      'spec.httpFault[0].delay.percent: must be from 0 to 100, not "150"',
      expect.stringMatching(/not the FaultInjection operator-demo\/other-name the table names/),
    ]);
    expect(names(merged.rules)).toEqual(['cluster:CircuitBreaker/demo-breaker@1']);
  });
});

/** A table carrying `rules`. */
const tableWith = (version: number, rules: TableRule[]): RouteTable => ({ ...routeTableFixture({ version }), rules });

class ScriptedLabels implements PodLabelsSource {
  readonly description = 'scripted labels';
  onLabels: ((labels: PodLabels) => void) | undefined;
  constructor(private readonly first: PodLabels) {}
  async start(onLabels: (labels: PodLabels) => void): Promise<void> {
    this.onLabels = onLabels;
    onLabels(this.first);
  }
  async stop(): Promise<void> {}
}

class ScriptedFiles implements RuleSource {
  readonly description = 'scripted files';
  handlers: RuleSourceHandlers | undefined;
  constructor(private readonly first: CompiledRule[]) {}
  async start(handlers: RuleSourceHandlers): Promise<void> {
    this.handlers = handlers;
    handlers.onRules({ inForce: this.first } as unknown as RuleSet);
  }
  async stop(): Promise<void> {}
}

describe('LiveRules: the rules in force as tables, files and labels change', () => {
  it('reports a rule set only when the rules in force change, and says when the acknowledged rules change', async () => {
    const labels = new ScriptedLabels({ app: 'other' });
    const live = new LiveRules({ podLabels: labels, logger: pino({ level: 'silent' }), now: () => 0 });
    const sets: RuleSet[] = [];
    let reacks = 0;
    await live.start({ onRules: (rules) => sets.push(rules), onApplied: () => (reacks += 1) });
    expect(sets.map(names)).toEqual([[]]);
    const t1 = tableWith(1, [tableRule(breaker)]);
    live.tableInstalled(t1);
    // Not selected (app=other): nothing changes, nothing to acknowledge.
    expect(sets).toHaveLength(1);
    expect(live.appliedRules(t1)).toEqual([]);
    labels.onLabels?.({ app: 'operator-demo' });
    expect(sets.map(names).at(-1)).toEqual(['cluster:CircuitBreaker/demo-breaker@1']);
    expect(reacks).toBe(1);
    expect(live.appliedRules(t1)).toEqual([{ kind: 'CircuitBreaker', namespace: 'operator-demo', name: 'demo-breaker', generation: 1 }]);
    // A newer table with the same rule: same rules in force, no new set.
    live.tableInstalled(tableWith(2, [tableRule(breaker)]));
    expect(sets).toHaveLength(2);
    expect(reacks).toBe(1);
    live.tableInstalled(tableWith(3, []));
    expect(sets.map(names).at(-1)).toEqual([]);
    expect(reacks).toBe(2);
    await live.stop();
  });

  it('merges the files with the table; a changed file is a new set even with the same names', async () => {
    const fileRule = (): CompiledRule => compileRule({ kind: 'CircuitBreaker', name: 'local', namespace: 'default', spec: {} }, 0, 'file', 0);
    const files = new ScriptedFiles([fileRule()]);
    const live = new LiveRules({ files, logger: pino({ level: 'silent' }), now: () => 0 });
    const sets: RuleSet[] = [];
    await live.start({ onRules: (rules) => sets.push(rules) });
    live.tableInstalled(tableWith(1, [tableRule(deletesLimit('everyone', 1))]));
    expect(names(sets.at(-1)!)).toEqual(['file:CircuitBreaker/local@0', 'cluster:CircuitBreaker/everyone@1']);
    const count = sets.length;
    files.handlers?.onRules({ inForce: [fileRule()] } as unknown as RuleSet);
    expect(sets).toHaveLength(count + 1);
  });
});

describe('parsePodLabels: the downward API labels file', () => {
  it('reads key="value" lines with Go-quoted values', () => {
    const text = ['app="operator-demo"', 'app.kubernetes.io/name="x\\"y"', 'empty=""', 'path="a\\\\b\\tc\\n"', 'uni="\\u00e9t\\u00e9 \\U0001F600 caf\\xc3\\xa9 \\101"', 'plain="été"', ''].join('\n');
    expect(parsePodLabels(text)).toEqual({
      ok: true,
      labels: { app: 'operator-demo', 'app.kubernetes.io/name': 'x"y', empty: '', path: 'a\\b\tc\n', uni: 'été 😀 café A', plain: 'été' },
    });
    expect(parsePodLabels('')).toEqual({ ok: true, labels: {} });
    expect(parsePodLabels('a="1"\r\nb="2"\r\n')).toEqual({ ok: true, labels: { a: '1', b: '2' } });
  });

  it('refuses the whole file for a bad line, naming every line at fault', () => {
    const parsed = parsePodLabels(['app="ok"', 'novalue', '="x"', 'k=unquoted', 'k2="open', 'k3="bad \\q escape"', 'k4="\\xZZ"', 'app="again"', 'k5="\\xff"'].join('\n'));
    expect(parsed).toEqual({
      ok: false,
      problems: [
        'line 2: not key="value"',
        'line 3: not key="value"',
        'line 4: the value of k is not a Go-quoted string',
        'line 5: the value of k2 is not a Go-quoted string',
        'line 6: the value of k3 is not a Go-quoted string',
        'line 7: the value of k4 is not a Go-quoted string',
        'line 8: app is given twice',
        'line 9: the value of k5 is not a Go-quoted string',
      ],
    });
    expect(unquoteGo('"a"b"')).toBeUndefined();
    expect(unquoteGo('"\\ud800"')).toBeUndefined();
  });

  it('refuses a file larger than any label set', () => {
    const big = `k="${'v'.repeat(MAX_POD_LABELS_BYTES)}"`;
    expect(parsePodLabels(big)).toMatchObject({ ok: false, problems: [expect.stringMatching(/more than the 262144/)] });
  });
});
