import { describe, expect, it } from 'vitest';
import { ShardingConfigValidator } from '../../../src/agent/sharding-configs.js';

function config(resourceVersion: string, spec: unknown): { apiVersion: string; kind: string; metadata: Record<string, string>; spec: unknown } {
  return { apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'ShardingConfig', metadata: { name: 'demo', namespace: 'operators', uid: 'u-1', resourceVersion }, spec };
}
const valid = { selector: { matchLabels: { app: 'demo' } } };
const invalid = { limits: [{ selector: { matchExpressions: [{ key: 'x', operator: 'Near' }] } }] };

describe('ShardingConfigValidator', () => {
  it('validates a version once, whoever asks, and gives the model of a valid one', () => {
    const validator = new ShardingConfigValidator(32);
    const [first] = validator.validateAll([config('1', valid)]);
    expect(first?.model?.selector).toEqual(valid.selector);
    const again = validator.validate(config('1', valid));
    expect(again.validation).toBe(first?.validation);
  });

  it('validates a new version anew, and keeps the problems of an invalid one', () => {
    const validator = new ShardingConfigValidator(32);
    const [before] = validator.validateAll([config('1', valid)]);
    const [after] = validator.validateAll([config('2', invalid)]);
    expect(after?.validation).not.toBe(before?.validation);
    expect(after?.model).toBeUndefined();
    expect(after?.validation.ok).toBe(false);
  });

  it('forgets the versions the informer no longer holds', () => {
    const validator = new ShardingConfigValidator(32);
    const [first] = validator.validateAll([config('1', valid)]);
    validator.validateAll([]);
    expect(validator.validate(config('1', valid)).validation).not.toBe(first?.validation);
  });
});
