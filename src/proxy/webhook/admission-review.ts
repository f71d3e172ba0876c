/**
 * Reading an AdmissionReview as the proxy must before it routes it (pure): only the namespace that decides the owner.
 * Whatever it cannot read with certainty is refused (400), never guessed at: the review then goes nowhere, and the
 * API server applies the webhook's failurePolicy.
 */

/** controller-runtime's own limit on a review ("any more than 7MB is probably an attack"): an update carries two objects. */
export const WEBHOOK_MAX_BODY_BYTES = 7 * 1024 * 1024;

/** What routing needs from a review. */
export interface ReviewTarget {
  uid: string;
  /**
   * The namespace whose bucket decides the owning shard: `request.namespace`, or `request.name` for a Namespace
   * itself. Absent for a cluster-scoped object (or a Namespace not named yet), which the local operator answers.
   */
  namespace?: string;
}

export type ReviewReading = { ok: true; review: ReviewTarget } | { ok: false; message: string };

const REVIEW_API_VERSION = 'admission.k8s.io/v1';

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Index of the `"` closing the string whose opening `"` is at `open` (the text is valid JSON). */
function stringEnd(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  for (;;) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === 0x5c) backslashes += 1;
    if (backslashes % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
}

/**
 * The first key that appears twice in one object of a valid JSON text, decoded (`"a"` and `"\u0061"` are the same
 * key), or undefined. JSON.parse keeps the last of them, other readers the first: a review with one would not mean
 * the same thing to the proxy and to every operator.
 */
export function duplicateKey(text: string): string | undefined {
  /** One entry per open object (its keys so far) or array (null). */
  const open: (Set<string> | null)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = stringEnd(text, i);
      const keys = open.at(-1);
      if (expectKey && keys) {
        const raw = text.slice(i + 1, end);
        const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
        if (keys.has(key)) return key;
        keys.add(key);
        expectKey = false;
      }
      i = end;
    } else if (c === 0x7b) {
      open.push(new Set());
      expectKey = true;
    } else if (c === 0x5b) {
      open.push(null);
    } else if (c === 0x7d || c === 0x5d) {
      open.pop();
    } else if (c === 0x2c) {
      expectKey = open.at(-1) != null;
    }
  }
  return undefined;
}

/** Go's encoding/json limit, which the operator's own decoder applies: deeper is no review the operator would read. */
export const WEBHOOK_MAX_DEPTH = 10_000;

/**
 * Whether objects and arrays nest deeper than `limit` anywhere in a text, valid JSON or not: checked before
 * JSON.parse, whose time on a deeply nested body (seconds for 7 MiB) would hold the event loop the operator's API
 * calls share.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i += 1;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth += 1;
      if (depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth -= 1;
  }
  return false;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/** An admission.k8s.io/v1 AdmissionReview with a request, read for its uid and the namespace that decides its owner. */
export function readAdmissionReview(body: Uint8Array): ReviewReading {
  const refuse = (message: string): ReviewReading => ({ ok: false, message });
  if (body.byteLength > WEBHOOK_MAX_BODY_BYTES) return refuse(`the review is larger than ${WEBHOOK_MAX_BODY_BYTES} bytes`);
  let text: string;
  let review: unknown;
  try {
    text = decoder.decode(body);
  } catch {
    return refuse('the body is not JSON (UTF-8)');
  }
  if (nestsDeeperThan(text, WEBHOOK_MAX_DEPTH)) return refuse(`the review nests deeper than ${WEBHOOK_MAX_DEPTH} levels`);
  try {
    review = JSON.parse(text);
  } catch {
    return refuse('the body is not JSON (UTF-8)');
  }
  if (!isObject(review)) return refuse('the body is not a JSON object');
  const duplicate = duplicateKey(text);
  if (duplicate !== undefined) return refuse(`the review has the key "${duplicate}" twice in one object`);
  if (review.apiVersion !== REVIEW_API_VERSION || review.kind !== 'AdmissionReview') {
    return refuse(`expected an AdmissionReview of ${REVIEW_API_VERSION} (list v1 in the webhook's admissionReviewVersions), not ${String(review.kind)} of ${String(review.apiVersion)}`);
  }
  const request = review.request;
  if (!isObject(request)) return refuse('the review has no request');
  const { uid, kind, namespace, name } = request;
  if (typeof uid !== 'string' || uid === '') return refuse('request.uid is not a non-empty string');
  if (!isObject(kind) || typeof kind.group !== 'string' || typeof kind.kind !== 'string') return refuse('request.kind is not a group, version and kind');
  if (namespace !== undefined && typeof namespace !== 'string') return refuse('request.namespace is not a string');
  if (name !== undefined && typeof name !== 'string') return refuse('request.name is not a string');
  // A Namespace belongs to its own bucket, as the proxy's API path judges it.
  const decisive = kind.group === '' && kind.kind === 'Namespace' ? name : namespace;
  return { ok: true, review: { uid, ...(decisive ? { namespace: decisive } : {}) } };
}
