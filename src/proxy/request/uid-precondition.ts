/**
 * The write the proxy forwards for an object sharded by uid, once it has read the object and judged its uid: the
 * client's body with a uid precondition, so the API server refuses the write if the name now belongs to another
 * object (deleted and created again meanwhile, in another bucket). Pure: text in, text or refusal out.
 */
export type Preconditioned = { body: string; contentType: string } | { code: 400 | 415; message: string };

const JSON_TYPE = 'application/json';

function mediaType(contentType: string | undefined): string | undefined {
  return contentType?.split(';')[0]?.trim().toLowerCase();
}

function parse(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Sets `holder[key].uid` unless the client set one (a different one makes the API server refuse the write). */
function withUid(holder: Record<string, unknown>, key: string, uid: string): boolean {
  const inner = holder[key] === undefined ? {} : holder[key];
  if (!isObject(inner)) return false;
  holder[key] = { ...inner, uid: inner.uid ?? uid };
  return true;
}

export function withUidPrecondition(verb: 'update' | 'patch' | 'delete', contentType: string | undefined, body: string, uid: string): Preconditioned {
  const type = mediaType(contentType);
  if (verb === 'delete') {
    if (body.trim() === '') return { body: JSON.stringify({ apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } }), contentType: JSON_TYPE };
    const options = type === undefined || type === JSON_TYPE ? parse(body) : undefined;
    if (!isObject(options) || !withUid(options, 'preconditions', uid)) return { code: 400, message: 'the DeleteOptions of an object sharded by uid must be a JSON object' };
    return { body: JSON.stringify(options), contentType: JSON_TYPE };
  }
  if (type === 'application/json-patch+json' && verb === 'patch') {
    const ops = parse(body);
    if (!Array.isArray(ops)) return { code: 400, message: 'a JSON patch must be an array' };
    return { body: JSON.stringify([{ op: 'test', path: '/metadata/uid', value: uid }, ...ops]), contentType: type };
  }
  const objectTypes = verb === 'update' ? [JSON_TYPE] : ['application/merge-patch+json', 'application/strategic-merge-patch+json'];
  if (type === undefined || !objectTypes.includes(type)) {
    return { code: 415, message: `a ${verb} of an object sharded by uid must be sent as ${[...objectTypes, ...(verb === 'patch' ? ['application/json-patch+json'] : [])].join(' or ')}: the proxy adds the uid it judged` };
  }
  const object = parse(body);
  if (!isObject(object) || !withUid(object, 'metadata', uid)) return { code: 400, message: `the body of a ${verb} must be a JSON object whose metadata is an object` };
  return { body: JSON.stringify(object), contentType: type };
}
