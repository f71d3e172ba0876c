import type { FastifyReply } from 'fastify';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProxyMetrics } from '../../metrics/index.js';
import { judge, type RuleClock, type RuleSet } from '../rules/index.js';
import type { RequestGuard } from './api-handler.js';
import type { ResourceRequest } from './parse/index.js';
import { sendStatus, statusFor } from './status.js';

/** Applies CircuitBreaker and FaultInjection rules to Kubernetes API calls, answering with Status bodies. */
export function createApiGuard(options: { rules: () => RuleSet; clock: RuleClock; metrics: ProxyMetrics }): RequestGuard {
  const { rules, clock, metrics } = options;
  const guarded = async (current: RuleSet, info: ResourceRequest, reply: FastifyReply): Promise<boolean> => {
    const call = { kind: 'resource' as const, verb: info.verb, group: info.group, resource: info.resource, namespace: info.namespace };
    const outcome = judge(current, call, clock, metrics);
    if (outcome.delayMs > 0) await sleep(outcome.delayMs);
    if (outcome.action === 'pass') return false;
    sendStatus(reply, statusFor(outcome.code, outcome.message), outcome.retryAfterSeconds);
    return true;
  };
  return {
    // Every proxy has a guard (cluster rules may arrive with any table); with no rule in force it costs one check.
    applies: (info) => info.kind === 'resource' && rules().inForce.length > 0,
    judge: async ({ info, reply }) => (info.kind === 'resource' ? guarded(rules(), info, reply) : false),
  };
}
