import { validateManifest, type CircuitBreakerModel, type FaultInjectionModel, type LabelSelector } from '../../api/index.js';
import { matches } from '../../sharding/index.js';
import type { AckRule, TableRule } from '../../transport/index.js';
import { compileRule, ruleSetOf, type CompiledRule, type RuleIdentity } from './compiled-rule.js';
import type { RuleSet } from './rule-set.js';

/** The labels of the proxy's own pod (`--pod-labels`). */
export type PodLabels = Readonly<Record<string, string>>;

export interface MergeInput {
  /** The `--rules` files' rules, in the order they are declared. */
  files: readonly CompiledRule[];
  /** The current route table's cluster rules (absent: none). */
  table: readonly TableRule[] | undefined;
  /** This pod's labels; undefined when not known (no `--pod-labels`). */
  podLabels: PodLabels | undefined;
  /** The cluster rules the previous merge compiled, by ruleKey: reused, with their state. */
  compiled: ReadonlyMap<string, CompiledRule>;
  now: number;
}

export interface MergeResult {
  rules: RuleSet;
  /** The cluster rules compiled now, by ruleKey: the next merge's `compiled`. */
  compiled: Map<string, CompiledRule>;
  /** The table's rules in force, in table order: what the acknowledgement of the table names. */
  applied: AckRule[];
  /** Table rules this pod selects that the proxy's own validation refuses, with the fields at fault. */
  refused: { rule: TableRule; reason: string }[];
  /** Table rules this pod selects that a file rule of the same kind and name replaces. */
  overridden: TableRule[];
}

/** A rule's identity as one string: the state of a cluster rule lives as long as it is unchanged. */
export function ruleKey(rule: RuleIdentity): string {
  return `${rule.kind}/${rule.namespace}/${rule.name}@${rule.generation}`;
}

/**
 * Whether a rule's `spec.selector` selects this pod. An absent or empty selector selects every pod of the namespace;
 * with the pod's labels unknown, only such a rule applies (a selector cannot be judged without labels).
 */
export function selectsPod(selector: LabelSelector | undefined, labels: PodLabels | undefined): boolean {
  const empty = selector === undefined || (Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0);
  if (labels === undefined) return empty;
  return empty || matches(selector, labels);
}

/** The table rule's manifest validated here again (the proxy builds its rules from it), or why it cannot be used. */
function checked(rule: TableRule): CircuitBreakerModel | FaultInjectionModel | string {
  const result = validateManifest(rule.manifest);
  if (!result.ok) return result.problems.map((p) => `${p.path}: ${p.reason}`).join('; ');
  const model = result.model;
  if (model.kind !== rule.kind || model.name !== rule.name || model.namespace !== rule.namespace) {
    return `the manifest is ${model.kind} ${model.namespace}/${model.name}, not the ${rule.kind} ${rule.namespace}/${rule.name} the table names`;
  }
  return model;
}

/**
 * The rules in force on this proxy (pure): every `--rules` file rule, then the table's rules whose selector selects
 * this pod, in table order. A file rule with the same kind and name as a table rule replaces it (the deployer's
 * local override). A table rule keeps its compiled state while its kind, namespace, name and generation stay the
 * same; a new generation starts fresh.
 */
export function mergeRules(input: MergeInput): MergeResult {
  const fromFiles = new Set(input.files.map((r) => `${r.kind}/${r.name}`));
  const compiled = new Map<string, CompiledRule>();
  const cluster: CompiledRule[] = [];
  const refused: MergeResult['refused'] = [];
  const overridden: TableRule[] = [];
  for (const rule of input.table ?? []) {
    if (!selectsPod(rule.selector, input.podLabels)) continue;
    if (fromFiles.has(`${rule.kind}/${rule.name}`)) {
      overridden.push(rule);
      continue;
    }
    const key = ruleKey(rule);
    let done = input.compiled.get(key) ?? compiled.get(key);
    if (done === undefined) {
      const model = checked(rule);
      if (typeof model === 'string') {
        refused.push({ rule, reason: model });
        continue;
      }
      done = compileRule(model, rule.generation, 'cluster', input.now);
    }
    compiled.set(key, done);
    cluster.push(done);
  }
  return {
    rules: ruleSetOf([...input.files, ...cluster], input.now),
    compiled,
    applied: cluster.map(({ kind, namespace, name, generation }) => ({ kind, namespace, name, generation })),
    refused,
    overridden,
  };
}
