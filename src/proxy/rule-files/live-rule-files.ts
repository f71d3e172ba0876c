import type { Logger } from 'pino';
import { LiveRules } from '../rules/index.js';
import { FileRuleSource } from './file-rule-source.js';
import { PodLabelsFile } from './pod-labels-file.js';

/**
 * The proxy's rules as `ctrlmesh proxy` takes them: the `--rules` files (if any) merged with the route table's
 * cluster rules that select the pod whose labels `--pod-labels` holds (without it: only cluster rules with no
 * selector). Both files are polled for changes.
 */
export function liveRulesFromFiles(options: { rules: readonly string[]; podLabels?: string; logger: Logger; now: () => number; pollIntervalMs?: number }): LiveRules {
  const { logger, now, pollIntervalMs } = options;
  const poll = pollIntervalMs === undefined ? {} : { pollIntervalMs };
  return new LiveRules({
    ...(options.rules.length > 0 ? { files: new FileRuleSource({ paths: options.rules, logger, now, ...poll }) } : {}),
    ...(options.podLabels === undefined ? {} : { podLabels: new PodLabelsFile({ path: options.podLabels, logger, ...poll }) }),
    logger,
    now,
  });
}
