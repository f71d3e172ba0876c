/**
 * The one thing the proxy reads and writes in Kubernetes' protobuf encoding: an object's `metadata.name`.
 *
 * client-go sends built-in kinds as protobuf by default: the bytes `k8s\0`, then a `runtime.Unknown` message whose
 * field 2 (`raw`) is the object; every object's field 1 is its `ObjectMeta`, whose field 1 is `name`. Only that path
 * is walked; every other field is kept byte for byte, so what is forwarded is what the API server would have read but
 * for the name. Written by hand rather than with a protobuf library: no schema is needed for one fixed path, and the
 * walk must refuse what a generated decoder would merge silently (a field on the path given twice).
 */

/** client-go's prefix of a protobuf body (`k8s.io/apimachinery/pkg/runtime/serializer/protobuf`). */
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);
export const PROTOBUF_TYPE = 'application/vnd.kubernetes.protobuf';

/** The path to `metadata.name`: Unknown.raw, then the object's metadata, then its name. */
const RAW = 2;
const CONTENT_ENCODING = 3;
const METADATA = 1;
const NAME = 1;

/** A body that is not a well-formed Kubernetes protobuf object, or that the walk cannot read with certainty. */
export class ProtobufBodyError extends Error {
  constructor(reason: string) {
    super(`protobuf body: ${reason}`);
    this.name = 'ProtobufBodyError';
  }
}

interface Field {
  number: number;
  /** Where the field's tag ends, where its value starts (after a length) and where the field ends. */
  tagEnd: number;
  valueStart: number;
  end: number;
  wireType: number;
}

function readVarint(bytes: Buffer, at: number): { value: number; next: number } {
  let value = 0;
  let shift = 0;
  for (let i = at; i < bytes.length && i < at + 10; i++) {
    const byte = bytes[i]!;
    value += (byte & 0x7f) * 2 ** shift;
    // Lengths and field numbers past 2^53 cannot be real in a body of a few MiB: refused rather than rounded.
    if (value > Number.MAX_SAFE_INTEGER) throw new ProtobufBodyError('a varint is out of range');
    if ((byte & 0x80) === 0) return { value, next: i + 1 };
    shift += 7;
  }
  throw new ProtobufBodyError('a varint is cut short');
}

function writeVarint(value: number): Buffer {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
  return Buffer.from(out);
}

/** Every field of one message, in order; wire types other than varint, 64-bit, length-delimited and 32-bit are refused. */
function fieldsOf(message: Buffer): Field[] {
  const fields: Field[] = [];
  let at = 0;
  while (at < message.length) {
    const tag = readVarint(message, at);
    const number = Math.floor(tag.value / 8);
    const wireType = tag.value % 8;
    if (number === 0) throw new ProtobufBodyError('a field numbered 0');
    at = tag.next;
    let valueStart = at;
    if (wireType === 0) at = readVarint(message, at).next;
    else if (wireType === 1) at += 8;
    else if (wireType === 5) at += 4;
    else if (wireType === 2) {
      const length = readVarint(message, at);
      valueStart = length.next;
      at = length.next + length.value;
    } else throw new ProtobufBodyError(`wire type ${wireType} (groups are not used by Kubernetes)`);
    if (at > message.length) throw new ProtobufBodyError('a field runs past the end of its message');
    fields.push({ number, tagEnd: tag.next, valueStart, end: at, wireType });
  }
  return fields;
}

/** The one length-delimited field numbered `number`; undefined when absent; refused when given twice or not length-delimited. */
function onlyField(message: Buffer, number: number, what: string): Field | undefined {
  const found = fieldsOf(message).filter((field) => field.number === number);
  if (found.length > 1) throw new ProtobufBodyError(`${what} is given ${found.length} times`);
  const field = found[0];
  if (field !== undefined && field.wireType !== 2) throw new ProtobufBodyError(`${what} is not length-delimited`);
  return field;
}

/** The message with field `field` (length-delimited) holding `value` instead. */
function replaced(message: Buffer, field: Field, value: Buffer): Buffer {
  // The tag as it was sent, a new length, the new value.
  return Buffer.concat([message.subarray(0, field.tagEnd), writeVarint(value.length), value, message.subarray(field.end)]);
}

/** Whether a body is in Kubernetes' protobuf envelope (by its first bytes). */
export function isProtobufBody(body: Buffer): boolean {
  return body.length >= MAGIC.length && body.subarray(0, MAGIC.length).equals(MAGIC);
}

/** The envelope's object (`raw`), with where it sits; refused when encoded, absent or ambiguous. */
function objectOf(body: Buffer): { unknown: Buffer; raw: Field } {
  if (!isProtobufBody(body)) throw new ProtobufBodyError('it does not start with the Kubernetes protobuf prefix');
  const unknown = body.subarray(MAGIC.length);
  const encoding = onlyField(unknown, CONTENT_ENCODING, 'the envelope\'s contentEncoding');
  if (encoding !== undefined && encoding.end > encoding.valueStart) throw new ProtobufBodyError('the object is encoded (contentEncoding is set)');
  const raw = onlyField(unknown, RAW, 'the envelope\'s object');
  if (raw === undefined) throw new ProtobufBodyError('the envelope holds no object');
  return { unknown, raw };
}

/**
 * The text of the string field at `path` inside the envelope's object (field numbers, outermost first), undefined
 * when any field on the way is absent; throws ProtobufBodyError for a body it cannot read with certainty.
 */
export function protobufString(body: Buffer, path: readonly number[]): string | undefined {
  const { unknown, raw } = objectOf(body);
  let message = unknown.subarray(raw.valueStart, raw.end);
  for (const [i, number] of path.entries()) {
    const field = onlyField(message, number, `field ${path.slice(0, i + 1).join('.')} of the object`);
    if (field === undefined) return undefined;
    message = message.subarray(field.valueStart, field.end);
  }
  return message.toString('utf8');
}

/** An object's `metadata.name` (undefined when it has none); throws ProtobufBodyError for a body it cannot read with certainty. */
export function protobufObjectName(body: Buffer): string | undefined {
  return protobufString(body, [METADATA, NAME]);
}

/** The body with the object's `metadata.name` set to `name` (it must have one); every other byte as it was. */
export function withProtobufObjectName(body: Buffer, name: string): Buffer {
  const { unknown, raw } = objectOf(body);
  const object = unknown.subarray(raw.valueStart, raw.end);
  const metadata = onlyField(object, METADATA, 'metadata');
  if (metadata === undefined) throw new ProtobufBodyError('the object has no metadata');
  const meta = object.subarray(metadata.valueStart, metadata.end);
  const nameField = onlyField(meta, NAME, 'metadata.name');
  if (nameField === undefined) throw new ProtobufBodyError('the object has no metadata.name');
  const newMeta = replaced(meta, nameField, Buffer.from(name, 'utf8'));
  const newObject = replaced(object, metadata, newMeta);
  return Buffer.concat([MAGIC, replaced(unknown, raw, newObject)]);
}
