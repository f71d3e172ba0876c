import type { HashSettings } from '../sharding/index.js';
import { meshLabels, missingLabels } from './labels.js';

/** The part of an admission.k8s.io/v1 AdmissionReview request the webhook reads. */
export interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  namespace?: string;
  object?: { metadata?: { name?: string; namespace?: string; labels?: Record<string, string> } };
}

export interface AdmissionResponse {
  uid: string;
  allowed: true;
  patchType?: 'JSONPatch';
  /** Base64 of the JSON Patch. */
  patch?: string;
}

/** RFC 6901: `~` and `/` inside a label key are escaped in a JSON pointer. */
function pointerToken(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * Labels a namespace with its own bucket, and any other object with its namespace's (pure). Namespaces in `skip`
 * and cluster-scoped objects other than namespaces pass untouched; the webhook never refuses anything.
 */
export function admit(request: AdmissionRequest, settings: HashSettings, skip: ReadonlySet<string>): AdmissionResponse {
  const allowed: AdmissionResponse = { uid: request.uid, allowed: true };
  const isNamespace = request.kind.group === '' && request.kind.kind === 'Namespace';
  const namespace = isNamespace ? request.object?.metadata?.name : (request.namespace ?? request.object?.metadata?.namespace);
  if (!namespace || skip.has(namespace)) return allowed;
  const current = request.object?.metadata?.labels;
  const missing = missingLabels(current, meshLabels(namespace, settings));
  if (!missing) return allowed;
  const ops = current
    ? Object.entries(missing).map(([k, v]) => ({ op: 'add', path: `/metadata/labels/${pointerToken(k)}`, value: v }))
    : [{ op: 'add', path: '/metadata/labels', value: missing }];
  return { ...allowed, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops)).toString('base64') };
}
