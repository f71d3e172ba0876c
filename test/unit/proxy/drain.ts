import type { Readable } from 'node:stream';

/** Everything a judged list answer holds, whichever form judgeList gave it in. */
export async function drain(body: Readable | Buffer | string): Promise<string> {
  if (typeof body === 'string') return body;
  if (Buffer.isBuffer(body)) return body.toString('utf8');
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}
