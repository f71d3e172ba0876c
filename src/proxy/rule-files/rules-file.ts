import { readFile } from 'node:fs/promises';
import { parseManifests, validateManifest } from '../../api/index.js';
import { FileError } from '../../errors.js';
import { compileRule, ruleSetOf, type CompiledRule, type RuleSet } from '../rules/index.js';

/** `metadata.generation` of a manifest as written in a file (usually absent: 0). */
function generationOf(doc: unknown): number {
  const generation = (doc as { metadata?: { generation?: unknown } }).metadata?.generation;
  return typeof generation === 'number' && Number.isInteger(generation) && generation >= 0 ? generation : 0;
}

/**
 * Reads CircuitBreaker and FaultInjection manifests (YAML, several documents per file) and compiles them into
 * one rule set. Any other kind, or an invalid manifest, is an error naming the file, the object and the field.
 */
export async function loadRules(paths: readonly string[], now: number): Promise<RuleSet> {
  return ruleSetOf(await loadRuleFiles(paths, now), now);
}

/** The rules of the files, compiled (fresh state), in the order they are declared; errors as loadRules says. */
export async function loadRuleFiles(paths: readonly string[], now: number): Promise<CompiledRule[]> {
  const rules: CompiledRule[] = [];
  for (const path of paths) {
    let docs: unknown[];
    try {
      docs = parseManifests(await readFile(path, 'utf8'));
    } catch (err) {
      throw new FileError(path, `cannot read the rules (${(err as Error).message})`, { cause: err });
    }
    for (const doc of docs) {
      const result = validateManifest(doc);
      if (!result.ok) {
        const problems = result.problems.map((p) => `${p.path} ${p.reason}`).join('; ');
        throw new FileError(path, `${result.kind} "${result.name}" is invalid: ${problems}`);
      }
      const model = result.model;
      if (model.kind === 'ShardingConfig') {
        throw new FileError(path, `${model.kind} "${model.name}" is not a rule: --rules takes CircuitBreaker and FaultInjection manifests`);
      }
      rules.push(compileRule(model, generationOf(doc), 'file', now));
    }
  }
  return rules;
}
