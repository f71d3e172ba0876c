import { setTimeout as sleep } from 'node:timers/promises';
import type { ProxyMetrics } from '../../../metrics/index.js';
import { judge, type RuleClock, type RuleSet } from '../../rules/index.js';
import type { RequestInfo } from '../parse/index.js';
import { refuse, type Judgement } from './judge.js';
import { statusFor, type KubeStatus } from './status.js';

/** A check run on a judged plan before it is carried out (rate limits, fault injection), which may answer in place of the API server. */
export interface RequestGuard {
  /** Whether a rule in force may judge this request; asked first, it changes nothing (a request it does not apply to goes on at once). */
  applies(info: RequestInfo): boolean;
  /** Judges a request it applies to, after the delay a rule asks for: the answer to send instead, or undefined to let it pass. */
  judge(call: { cluster: string; info: RequestInfo }): Promise<{ status: KubeStatus; retryAfterSeconds?: number } | undefined>;
}

/** Applies CircuitBreaker and FaultInjection rules to Kubernetes API calls, answering with Status bodies. */
export function createApiGuard(options: { rules: () => RuleSet; clock: RuleClock; metrics: ProxyMetrics }): RequestGuard {
  const { rules, clock, metrics } = options;
  return {
    // Every proxy has a guard (cluster rules may arrive with any table); with no rule in force it costs one check.
    applies: (info) => info.kind === 'resource' && rules().inForce.length > 0,
    judge: async ({ info }) => {
      if (info.kind !== 'resource') return undefined;
      const call = { kind: 'resource' as const, verb: info.verb, group: info.group, resource: info.resource, subresource: info.subresource, namespace: info.namespace };
      const outcome = judge(rules(), call, clock, metrics);
      if (outcome.delayMs > 0) await sleep(outcome.delayMs);
      if (outcome.action === 'pass') return undefined;
      return { status: statusFor(outcome.code, outcome.message), ...(outcome.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: outcome.retryAfterSeconds }) };
    },
  };
}

/**
 * The judgement with the rules in force applied: the one place every way in (plain, watch, upgrade) applies
 * CircuitBreaker and FaultInjection rules. They see every request whose cluster is known, a request the shard
 * refuses included, and answer in place of the shard's judgement (test/unit/proxy/api-handler.test.ts, "lets a guard
 * answer in place of the API server").
 */
export async function ruled(guard: RequestGuard | undefined, judged: Judgement): Promise<Judgement> {
  const target = judged.kind === 'forward' ? judged : judged.target;
  if (guard === undefined || target === undefined || !guard.applies(target.info)) return judged;
  const outcome = await guard.judge({ cluster: target.cluster, info: target.info });
  return outcome === undefined ? judged : refuse(judged, outcome.status, outcome.retryAfterSeconds);
}
