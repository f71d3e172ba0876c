import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isProtobufBody, ProtobufBodyError, protobufObjectName, withProtobufObjectName } from '../../../src/kube/protobuf.js';

// Bytes as client-go encodes them (tools/controller-runtime/protobuf-fixtures prints them).
const fixtures = JSON.parse(readFileSync(new URL('../fixtures/protobuf.json', import.meta.url), 'utf8')) as Record<'lease' | 'configMap' | 'status', string>;
const lease = Buffer.from(fixtures.lease, 'hex');
const configMap = Buffer.from(fixtures.configMap, 'hex');

/** A length-delimited field, as protobuf writes it (field numbers and lengths below 128). */
function field(number: number, value: Buffer): Buffer {
  return Buffer.concat([Buffer.from([(number << 3) | 2, value.length]), value]);
}
const MAGIC = Buffer.from('k8s\0', 'latin1');
const envelope = (object: Buffer): Buffer => Buffer.concat([MAGIC, field(2, object)]);

describe('protobufObjectName', () => {
  it('reads the name of objects client-go encodes', () => {
    expect(isProtobufBody(lease)).toBe(true);
    expect(protobufObjectName(lease)).toBe('operator-leader');
    expect(protobufObjectName(configMap)).toBe('settings');
    expect(isProtobufBody(Buffer.from('{"metadata":{}}'))).toBe(false);
  });

  it('renames changing nothing else: renamed back, the bytes are the ones sent', () => {
    const renamed = withProtobufObjectName(lease, 'operator-leader.cluster-a.demo-1-normal-0123456789');
    expect(protobufObjectName(renamed)).toBe('operator-leader.cluster-a.demo-1-normal-0123456789');
    expect(withProtobufObjectName(renamed, 'operator-leader').equals(lease)).toBe(true);
    // A name past 127 bytes takes a two-byte length at each level.
    const long = 'x'.repeat(200);
    expect(withProtobufObjectName(withProtobufObjectName(lease, long), 'operator-leader').equals(lease)).toBe(true);
  });

  it('refuses what a generated decoder would merge or misread', () => {
    const meta = (name: string): Buffer => field(1, field(1, Buffer.from(name)));
    const refused = (body: Buffer): void => expect(() => protobufObjectName(body)).toThrow(ProtobufBodyError);
    // metadata twice (gogo merges the two: the last name wins), or the name twice.
    refused(envelope(Buffer.concat([meta('operator-leader'), meta('other')])));
    refused(envelope(field(1, Buffer.concat([field(1, Buffer.from('operator-leader')), field(1, Buffer.from('other'))]))));
    // Two objects in the envelope; an encoded object; no object; a group; a field numbered 0; cut short; wrong prefix.
    refused(Buffer.concat([MAGIC, field(2, meta('a')), field(2, meta('b'))]));
    refused(Buffer.concat([envelope(meta('a')), field(3, Buffer.from('gzip'))]));
    refused(Buffer.concat([MAGIC, field(1, Buffer.from('x'))]));
    refused(envelope(Buffer.from([0x0b, 0x0c])));
    refused(envelope(Buffer.from([0x02, 0x00])));
    refused(lease.subarray(0, lease.length - 3));
    refused(Buffer.from('{"metadata":{"name":"operator-leader"}}'));
    // A varint past 2^53 is refused, never rounded to another length.
    refused(Buffer.concat([MAGIC, Buffer.from([0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])]));
  });

  it('says when an object has no name', () => {
    expect(protobufObjectName(envelope(field(2, Buffer.from('spec'))))).toBeUndefined();
    expect(() => withProtobufObjectName(envelope(field(2, Buffer.from('spec'))), 'x')).toThrow(ProtobufBodyError);
  });
});
