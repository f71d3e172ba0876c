import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { TestbedError } from '../../errors.js';

/*
 * Just enough of the CRI (gRPC over the containerd socket) to tear pods down at stop: list the pod sandboxes,
 * stop each (containerd kills its containers and runs CNI DEL: veth, IP reservation, the bridge plugin's
 * iptables masquerade rule, the network namespace) and remove it (containers, rootfs mounts, /dev/shm).
 * Killing processes and unmounting by hand would leave the per-pod iptables rules behind; crictl is not
 * installed, and three unary calls with one string field need no gRPC library: node:http2 and a few lines
 * of protobuf do it.
 */

const SERVICE = '/runtime.v1.RuntimeService';
const CALL_TIMEOUT_MS = 60_000;

/** A protobuf varint. */
export function encodeVarint(value: number): Buffer {
  const bytes: number[] = [];
  let v = value;
  while (v > 0x7f) {
    bytes.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  bytes.push(v);
  return Buffer.from(bytes);
}

/** A message whose fields are all strings (wire type 2), e.g. StopPodSandboxRequest{pod_sandbox_id = 1}. */
export function encodeStringFields(fields: Record<number, string>): Buffer {
  const parts: Buffer[] = [];
  for (const [number, value] of Object.entries(fields)) {
    const bytes = Buffer.from(value, 'utf8');
    parts.push(encodeVarint((Number(number) << 3) | 2), encodeVarint(bytes.length), bytes);
  }
  return Buffer.concat(parts);
}

export interface ProtoField {
  number: number;
  /** A varint's value, or the bytes of a length-delimited field (strings, nested messages). */
  value: number | Buffer;
}

/** The top-level fields of a protobuf message, in order; fixed32/64 are skipped (CRI's answers here have none we read). */
export function decodeFields(message: Buffer): ProtoField[] {
  const fields: ProtoField[] = [];
  let pos = 0;
  const varint = (): number => {
    let result = 0;
    let factor = 1;
    for (;;) {
      const byte = message[pos++];
      if (byte === undefined) throw new TestbedError('CRI answer: truncated protobuf varint');
      result += (byte & 0x7f) * factor;
      if (byte < 0x80) return result;
      factor *= 128;
    }
  };
  while (pos < message.length) {
    const key = varint();
    const number = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) fields.push({ number, value: varint() });
    else if (wire === 2) {
      const length = varint();
      if (pos + length > message.length) throw new TestbedError('CRI answer: truncated protobuf field');
      fields.push({ number, value: message.subarray(pos, pos + length) });
      pos += length;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new TestbedError(`CRI answer: unsupported protobuf wire type ${wire}`);
  }
  return fields;
}

export interface PodSandboxSummary {
  id: string;
  /** The pod's namespace/name, for progress lines. */
  name: string;
  /** SANDBOX_READY (0) or SANDBOX_NOTREADY (1). */
  ready: boolean;
}

const stringField = (fields: ProtoField[], number: number): string => {
  const value = fields.find((f) => f.number === number)?.value;
  return Buffer.isBuffer(value) ? value.toString('utf8') : '';
};

/** ListPodSandboxResponse{repeated PodSandbox items = 1}; PodSandbox{id = 1, metadata = 2{name = 1, uid = 2, namespace = 3}, state = 3}. */
export function decodePodSandboxes(response: Buffer): PodSandboxSummary[] {
  return decodeFields(response)
    .filter((f) => f.number === 1 && Buffer.isBuffer(f.value))
    .map((item) => {
      const fields = decodeFields(item.value as Buffer);
      const metadata = fields.find((f) => f.number === 2)?.value;
      const meta = Buffer.isBuffer(metadata) ? decodeFields(metadata) : [];
      const state = fields.find((f) => f.number === 3)?.value;
      return { id: stringField(fields, 1), name: `${stringField(meta, 3)}/${stringField(meta, 1)}`, ready: (state ?? 0) === 0 };
    });
}

/** A gRPC message frame: uncompressed flag, big-endian length, the message. */
export function grpcFrame(message: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

/** One unary call; resolves the response message. */
function unary(session: ClientHttp2Session, method: string, request: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: 'POST',
      [constants.HTTP2_HEADER_PATH]: `${SERVICE}/${method}`,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
      te: 'trailers',
    });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    let message = '';
    const timer = setTimeout(() => stream.close(constants.NGHTTP2_CANCEL), timeoutMs);
    const note = (headers: Record<string, unknown>): void => {
      if (headers['grpc-status'] !== undefined) status = String(headers['grpc-status']);
      if (headers['grpc-message'] !== undefined) message = decodeURIComponent(String(headers['grpc-message']));
    };
    stream.on('response', note); // a trailers-only answer (an error) carries the status in the headers
    stream.on('trailers', note);
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('error', (err) => {
      clearTimeout(timer);
      reject(new TestbedError(`CRI ${method}: ${err.message}`, { cause: err }));
    });
    stream.on('close', () => {
      clearTimeout(timer);
      if (status !== '0') {
        reject(new TestbedError(`CRI ${method} failed: ${status === undefined ? `no answer within ${timeoutMs / 1000} s` : `gRPC status ${status}: ${message}`}`));
        return;
      }
      const body = Buffer.concat(chunks);
      resolve(body.length >= 5 ? body.subarray(5, 5 + body.readUInt32BE(1)) : Buffer.alloc(0));
    });
    stream.end(grpcFrame(request));
  });
}

/** A CRI client on a containerd socket, for the calls a stop needs. */
export class CriClient {
  private constructor(private readonly session: ClientHttp2Session) {}

  static connect(socketPath: string): Promise<CriClient> {
    return new Promise((resolve, reject) => {
      const session = connect('http://localhost', { createConnection: () => netConnect(socketPath) });
      session.once('connect', () => resolve(new CriClient(session)));
      session.once('error', (err) => reject(new TestbedError(`cannot reach containerd's CRI at ${socketPath}: ${err.message}`, { cause: err })));
    });
  }

  async listPodSandboxes(): Promise<PodSandboxSummary[]> {
    return decodePodSandboxes(await unary(this.session, 'ListPodSandbox', Buffer.alloc(0), CALL_TIMEOUT_MS));
  }

  async stopPodSandbox(id: string): Promise<void> {
    await unary(this.session, 'StopPodSandbox', encodeStringFields({ 1: id }), CALL_TIMEOUT_MS);
  }

  async removePodSandbox(id: string): Promise<void> {
    await unary(this.session, 'RemovePodSandbox', encodeStringFields({ 1: id }), CALL_TIMEOUT_MS);
  }

  close(): void {
    this.session.close();
  }
}
