import type { Logger } from 'pino';
import type { AckRule, RouteTable, TableRule } from '../../transport/index.js';
import type { CompiledRule } from './compiled-rule.js';
import { mergeRules, type PodLabels } from './merge.js';
import type { RuleSource, RuleSourceHandlers } from './rule-source.js';

/** Where the pod's own labels come from (the downward API file of `--pod-labels`). */
export interface PodLabelsSource {
  readonly description: string;
  /** Reports the labels before it resolves, then every change; rejects when they cannot be read at start. */
  start(onLabels: (labels: PodLabels) => void): Promise<void>;
  stop(): Promise<void>;
}

export interface LiveRulesOptions {
  /** The `--rules` files, when any. */
  files?: RuleSource;
  /** The pod's labels, when known: without them only cluster rules with no (or an empty) selector apply. */
  podLabels?: PodLabelsSource;
  logger: Logger;
  now: () => number;
}

/**
 * The rules in force, live: the `--rules` files merged with the route table's cluster rules that select this pod
 * (rules/merge.ts). Told of each table installed (by the route controller) and of every change of the files and of
 * the pod's labels, it reports a new rule set only when the rules in force change, and says when the cluster rules
 * the current table's acknowledgement names change (so the table is acknowledged again).
 */
export class LiveRules implements RuleSource {
  readonly description: string;
  private readonly options: LiveRulesOptions;
  private handlers: RuleSourceHandlers | undefined;
  private files: readonly CompiledRule[] = [];
  private labels: PodLabels | undefined;
  private table: { version: number; rules: readonly TableRule[] | undefined } | undefined;
  private compiled = new Map<string, CompiledRule>();
  private inForce: readonly CompiledRule[] | undefined;
  private applied: AckRule[] = [];
  private problems = '';

  constructor(options: LiveRulesOptions) {
    this.options = options;
    const parts = [options.files?.description, options.podLabels ? `cluster rules selecting ${options.podLabels.description}` : 'cluster rules without a selector'];
    this.description = parts.filter(Boolean).join(' and ');
  }

  async start(handlers: RuleSourceHandlers): Promise<void> {
    this.handlers = handlers;
    await this.options.files?.start({
      onRules: (rules) => {
        this.files = rules.inForce;
        this.update();
      },
    });
    try {
      await this.options.podLabels?.start((labels) => {
        this.labels = labels;
        this.update();
      });
    } catch (err) {
      await this.options.files?.stop();
      throw err;
    }
    this.update();
  }

  async stop(): Promise<void> {
    await this.options.podLabels?.stop();
    await this.options.files?.stop();
  }

  tableInstalled(table: RouteTable): void {
    if (table.version === this.table?.version) return;
    this.table = { version: table.version, rules: table.rules };
    this.update();
  }

  appliedRules(table: RouteTable): AckRule[] {
    return table.version === this.table?.version ? this.applied : [];
  }

  private update(): void {
    const { handlers } = this;
    if (handlers === undefined) return;
    const merged = mergeRules({ files: this.files, table: this.table?.rules, podLabels: this.labels, compiled: this.compiled, now: this.options.now() });
    this.compiled = merged.compiled;
    const problems = JSON.stringify([merged.refused.map((r) => [r.rule.name, r.reason]), merged.overridden.map((r) => r.name)]);
    if (problems !== this.problems) {
      this.problems = problems;
      for (const { rule, reason } of merged.refused) {
        this.options.logger.error({ kind: rule.kind, rule: `${rule.namespace}/${rule.name}`, generation: rule.generation, reason }, 'cluster rule refused; it is not applied');
      }
      for (const rule of merged.overridden) {
        this.options.logger.warn({ kind: rule.kind, rule: `${rule.namespace}/${rule.name}` }, 'cluster rule replaced by the --rules file rule of the same kind and name');
      }
    }
    const before = this.inForce;
    const next = merged.rules.inForce;
    if (before === undefined || before.length !== next.length || next.some((rule, i) => rule !== before[i])) {
      this.inForce = next;
      handlers.onRules(merged.rules);
      this.options.logger.info({ rules: next.map((r) => ({ kind: r.kind, name: r.name, generation: r.generation, source: r.source })) }, 'rules in force');
    }
    const applied = JSON.stringify(merged.applied) !== JSON.stringify(this.applied);
    this.applied = merged.applied;
    if (applied) handlers.onApplied?.();
  }
}
