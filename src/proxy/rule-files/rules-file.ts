import { readFile } from 'node:fs/promises';
import { loadAllYaml } from '@kubernetes/client-node';
import { validateManifest, type CircuitBreakerSpec, type FaultInjectionSpec } from '../../api/index.js';
import { FileError } from '../../errors.js';
import { CircuitRules, FaultRules, type RuleSet } from '../rules/index.js';

/**
 * Reads CircuitBreaker and FaultInjection manifests (YAML, several documents per file) and compiles them into
 * one rule set. Any other kind, or an invalid manifest, is an error naming the file, the object and the field.
 */
export async function loadRules(paths: readonly string[], now: number): Promise<RuleSet> {
  const breakers: CircuitBreakerSpec[] = [];
  const faults: FaultInjectionSpec[] = [];
  for (const path of paths) {
    let docs: unknown[];
    try {
      docs = loadAllYaml(await readFile(path, 'utf8')) as unknown[];
    } catch (err) {
      throw new FileError(path, `cannot read the rules (${(err as Error).message})`, { cause: err });
    }
    for (const doc of docs.filter((d) => d !== null && d !== undefined)) {
      const result = validateManifest(doc);
      if (!result.ok) {
        const problems = result.problems.map((p) => `${p.path} ${p.reason}`).join('; ');
        throw new FileError(path, `${result.kind} "${result.name}" is invalid: ${problems}`);
      }
      const model = result.model;
      if (model.kind === 'CircuitBreaker') breakers.push(model.spec);
      else if (model.kind === 'FaultInjection') faults.push(model.spec);
      else throw new FileError(path, `${model.kind} "${model.name}" is not a rule: --rules takes CircuitBreaker and FaultInjection manifests`);
    }
  }
  return { circuit: new CircuitRules(breakers, now), faults: new FaultRules(faults) };
}
