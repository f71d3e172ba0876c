import { durationMs, type FaultInjectionSpec } from '../../api/index.js';
import { globToRegExp, resourceScore, type Call } from './matchers.js';

type HttpFault = NonNullable<FaultInjectionSpec['httpFault']>[number];
type StringMatch = { exact?: string; prefix?: string; regex?: string };
type EffectiveTime = NonNullable<HttpFault['effectiveTime']>;

export interface FaultPlan {
  /** Total delay: the delays of every rule that fired, added up. */
  delayMs: number;
  delayedBy: string[];
  /** The first abort that fired. */
  abort: { rule: string; httpStatus: number } | undefined;
}

function percentOf(value: number | string): number {
  return Math.min(100, Math.max(0, Number(value)));
}

function stringMatches(match: StringMatch | undefined, value: string | undefined): boolean {
  if (match === undefined) return true;
  if (value === undefined) return false;
  if (match.exact !== undefined && value !== match.exact) return false;
  if (match.prefix !== undefined && !value.startsWith(match.prefix)) return false;
  if (match.regex !== undefined && !new RegExp(match.regex).test(value)) return false;
  return true;
}

function secondsOfDay(hms: string): number {
  const [h, m, s] = hms.split(':').map(Number);
  return h! * 3600 + m! * 60 + s!;
}

/** Whether `now` lies in the window (UTC clock; an end before the start wraps past midnight). */
export function inEffectiveTime(window: EffectiveTime | undefined, now: Date): boolean {
  if (window === undefined) return true;
  if (window.daysOfWeek?.length && !window.daysOfWeek.includes(now.getUTCDay())) return false;
  if (window.daysOfMonth?.length && !window.daysOfMonth.includes(now.getUTCDate())) return false;
  if (window.months?.length && !window.months.includes(now.getUTCMonth() + 1)) return false;
  const t = now.getUTCHours() * 3600 + now.getUTCMinutes() * 60 + now.getUTCSeconds();
  const start = window.startTime === undefined ? 0 : secondsOfDay(window.startTime);
  const end = window.endTime === undefined ? 86_400 : secondsOfDay(window.endTime);
  return start <= end ? t >= start && t < end : t >= start || t < end;
}

function faultMatches(fault: HttpFault, call: Call): boolean {
  const match = fault.match;
  if (match === undefined) return true;
  if (call.kind === 'resource') {
    return [...(match.resources ?? []), ...(match.relatedResources ?? [])].some((r) => resourceScore(r, call) !== undefined);
  }
  const byHttpMatch = (match.httpMatch ?? []).some(
    (h) => (h.method === undefined || h.method.toUpperCase() === call.method) && stringMatches(h.host, call.host) && stringMatches(h.path, call.path),
  );
  // KusionStack's Go form: URL globs and methods, each list matching any of its entries.
  const byRestRule = (match.restRules ?? []).some(
    (r) => r.method.some((m) => m === '*' || m.toUpperCase() === call.method) && r.url.some((u) => globToRegExp(u).test(call.url)),
  );
  return byHttpMatch || byRestRule;
}

/**
 * FaultInjection rules compiled once. Each matching rule in its effective time rolls its own percent (the
 * random source is passed in): delays add up, the first abort wins.
 */
export class FaultRules {
  private readonly faults: HttpFault[];

  constructor(specs: readonly FaultInjectionSpec[]) {
    this.faults = specs.filter((s) => s.disabled !== true).flatMap((s) => s.httpFault ?? []);
  }

  get empty(): boolean {
    return this.faults.length === 0;
  }

  plan(call: Call, now: Date, random: () => number): FaultPlan {
    const plan: FaultPlan = { delayMs: 0, delayedBy: [], abort: undefined };
    for (const fault of this.faults) {
      if (!faultMatches(fault, call) || !inEffectiveTime(fault.effectiveTime, now)) continue;
      if (fault.delay && random() * 100 < percentOf(fault.delay.percent)) {
        plan.delayMs += durationMs(fault.delay.fixedDelay);
        plan.delayedBy.push(fault.name);
      }
      if (fault.abort && plan.abort === undefined && random() * 100 < percentOf(fault.abort.percent)) {
        plan.abort = { rule: fault.name, httpStatus: fault.abort.httpStatus };
      }
    }
    return plan;
  }
}
