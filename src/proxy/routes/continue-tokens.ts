import { createCipheriv, createDecipheriv } from 'node:crypto';

/** What starts a sealed token: no token of the API server's starts so (they are base64 of JSON: `ey...`). */
const PREFIX = 'ctrlmesh.1.';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * The `continue` token of a list the proxy filtered, sealed (AES-256-GCM under a key of this process) so the shard
 * never reads it: the API server's token is base64 of JSON naming the key it resumes from, which can be an object the
 * proxy cut from the page (another shard's namespace and name). A sealed token is opened again when the client
 * sends it back, bound to the request it was given for; one this process cannot open (another replica's, one sent to
 * another list, a forged one) is answered 410 Expired, on which client-go's pager and reflector list again from the
 * start (test/unit/proxy/continue-tokens.test.ts, test/integration/proxy-boundary.test.ts).
 */
export class ContinueTokens {
  private readonly key: Buffer;
  private readonly randomBytes: (size: number) => Buffer;

  /** `key`: 32 random bytes, one per process; `randomBytes`: the source of each token's nonce. */
  constructor(options: { key: Buffer; randomBytes: (size: number) => Buffer }) {
    if (options.key.length !== 32) throw new Error('a continue-token key is 32 bytes');
    this.key = options.key;
    this.randomBytes = options.randomBytes;
  }

  /** Whether a `continue` the client sent is one the proxy sealed (else the API server's own, passed as it is). */
  isSealed(token: string): boolean {
    return token.startsWith(PREFIX);
  }

  /** The token sealed for the list it was answered to (`bound`: the cluster and the list's path). */
  seal(token: string, bound: string): string {
    const iv = this.randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(bound, 'utf8'));
    const sealed = Buffer.concat([cipher.update(token, 'utf8'), cipher.final()]);
    return `${PREFIX}${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url')}`;
  }

  /** The API server's token inside a sealed one, or undefined when it was not sealed here for `bound`. */
  open(token: string, bound: string): string | undefined {
    if (!this.isSealed(token)) return undefined;
    const bytes = Buffer.from(token.slice(PREFIX.length), 'base64url');
    if (bytes.length < IV_BYTES + TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(bound, 'utf8'));
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      // A wrong tag: not sealed here, or not for this list.
      return undefined;
    }
  }
}
