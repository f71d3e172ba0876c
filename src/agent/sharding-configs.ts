import type { KubernetesObject } from '@kubernetes/client-node';
import { validateManifest, type ShardingConfigModel, type ValidationResult } from '../api/index.js';

/** A ShardingConfig as the agent holds it: the object read from the API server and what validating it found. */
export interface ValidatedConfig {
  object: KubernetesObject;
  /** The model, or the problems the config's status names. */
  validation: ValidationResult;
  /** The model, when the object is a valid ShardingConfig. */
  model?: ShardingConfigModel;
}

/**
 * The agent's one place that validates ShardingConfigs, each version once (a version is its uid and
 * resourceVersion): the informer's copies as they arrive, and those the sidecar webhook reads fresh at admission,
 * mostly the same versions. The report, the statuses, the related resources and the injector take the result
 * from here. Versions the informer no longer holds are forgotten at its next pass.
 */
export class ShardingConfigValidator {
  private known = new Map<string, ValidationResult>();

  constructor(private readonly bucketCount: number) {}

  /** The informer's ShardingConfigs, validated; what it no longer holds is forgotten. */
  validateAll(objects: readonly KubernetesObject[]): ValidatedConfig[] {
    const validated = objects.map((object) => this.validate(object));
    const held = new Set(objects.map(versionKey));
    for (const key of this.known.keys()) if (!held.has(key)) this.known.delete(key);
    return validated;
  }

  /** One ShardingConfig, validated unless this version already was. */
  validate(object: KubernetesObject): ValidatedConfig {
    const key = versionKey(object);
    let validation = key === undefined ? undefined : this.known.get(key);
    if (!validation) {
      validation = validateManifest(object, { bucketCount: this.bucketCount });
      if (key !== undefined) this.known.set(key, validation);
    }
    return { object, validation, ...(validation.ok && validation.model.kind === 'ShardingConfig' ? { model: validation.model } : {}) };
  }
}

/** What names one version of an object; none without a uid and a resourceVersion (such an object is validated each time). */
function versionKey(object: KubernetesObject): string | undefined {
  const { uid, resourceVersion } = object.metadata ?? {};
  return uid && resourceVersion ? `${uid}@${resourceVersion}` : undefined;
}
