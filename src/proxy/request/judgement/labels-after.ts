/**
 * The labels an object will carry after a write, computed from the write alone and the labels the proxy read: for an
 * object whose labels are its bucket (a cluster-scoped custom object), the proxy judges where a write leaves it as
 * well as where it finds it. Undefined where the write's effect on the labels cannot be told with certainty (a JSON
 * patch that moves, copies or replaces `/metadata` whole, a label that is not a string): the write is then refused.
 * Pure: text in, labels out.
 */
export type Labels = Readonly<Record<string, string>>;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parse(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

function stringLabels(value: unknown): Labels | undefined {
  if (value === undefined || value === null) return {};
  if (!isObject(value) || Object.values(value).some((v) => typeof v !== 'string')) return undefined;
  return value as Labels;
}

/** A merge patch's labels (RFC 7386): null removes a key, a string sets it, an absent map leaves them as they are. */
function mergePatched(current: Labels, patch: Record<string, unknown>): Labels | undefined {
  if (!Object.hasOwn(patch, 'metadata')) return current;
  const metadata = patch.metadata;
  if (metadata === null) return {};
  if (!isObject(metadata)) return undefined;
  if (!Object.hasOwn(metadata, 'labels')) return current;
  const labels = metadata.labels;
  if (labels === null) return {};
  if (!isObject(labels)) return undefined;
  const out: Record<string, string> = { ...current };
  for (const [key, value] of Object.entries(labels)) {
    if (value === null) delete out[key];
    else if (typeof value === 'string') out[key] = value;
    else return undefined;
  }
  return out;
}

const LABELS = '/metadata/labels';

/** A JSON pointer's reference token, unescaped (RFC 6901: `~1` is `/`, `~0` is `~`). */
function unescapeToken(token: string): string {
  return token.replace(/~1/gu, '/').replace(/~0/gu, '~');
}

/** Whether a pointer names the labels, something inside them, or something that holds them. */
function reachesLabels(pointer: string): boolean {
  return pointer === '' || pointer === '/metadata' || pointer === LABELS || pointer.startsWith(`${LABELS}/`);
}

/** A JSON patch's labels (RFC 6902), followed op by op; undefined for an op on them it does not follow. */
function jsonPatched(current: Labels, ops: unknown[]): Labels | undefined {
  let out: Record<string, string> = { ...current };
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string') return undefined;
    const from = op.from;
    if (typeof from === 'string' && reachesLabels(from) && op.op !== 'test') return undefined;
    if (!reachesLabels(op.path) || op.op === 'test') continue;
    if (op.op !== 'add' && op.op !== 'replace' && op.op !== 'remove') return undefined;
    if (op.path === LABELS) {
      if (op.op === 'remove') out = {};
      else {
        const labels = stringLabels(op.value);
        if (labels === undefined || op.value === null) return undefined;
        out = { ...labels };
      }
      continue;
    }
    if (!op.path.startsWith(`${LABELS}/`)) return undefined;
    // One token below the labels: a deeper path would reach into a label's value, which is text.
    const token = op.path.slice(LABELS.length + 1);
    if (token.includes('/')) return undefined;
    const key = unescapeToken(token);
    if (op.op === 'remove') delete out[key];
    else if (typeof op.value === 'string') out[key] = op.value;
    else return undefined;
  }
  return out;
}

/**
 * The labels after an update (the body's own, all of them), a merge patch or a JSON patch of an object now labelled
 * `current`; a delete leaves none to judge (undefined is never returned for it: the caller judges deletes by `current`).
 */
export function labelsAfter(verb: 'update' | 'patch', contentType: string | undefined, body: string, current: Labels): Labels | undefined {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  const parsed = parse(body);
  if (verb === 'update') {
    if (!isObject(parsed)) return undefined;
    const metadata = parsed.metadata;
    if (metadata === undefined || metadata === null) return {};
    return isObject(metadata) ? stringLabels(metadata.labels) : undefined;
  }
  if (type === 'application/json-patch+json') return Array.isArray(parsed) ? jsonPatched(current, parsed) : undefined;
  if (type === 'application/merge-patch+json' || type === 'application/strategic-merge-patch+json') return isObject(parsed) ? mergePatched(current, parsed) : undefined;
  return undefined;
}
