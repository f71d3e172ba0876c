/**
 * Reads from one watch event line (a JSON object, as the API server writes it) exactly what the shard's checks need,
 * without building objects: the event's `type`, the object's `kind` and `apiVersion`, and its `metadata.namespace`,
 * `name`, `uid`, `resourceVersion` and the `labels` asked for. Everything else is skipped: strings (escapes
 * included) are delimited exactly, nested objects and arrays are walked token by token, so a field named
 * `namespace` inside `spec`, or a string value containing `"namespace":"x"`, is never read as the object's.
 *
 * The scanner answers only when it is sure its reading is JSON.parse's: it gives up (returns undefined, and the
 * caller parses the line) on a key it must read that is written with an escape, a key it reads that appears twice
 * (JSON.parse keeps the last, Go's decoder merges objects), a value of an unexpected type (a `metadata` that is not
 * an object, a label that is not a string), nesting deeper than {@link MAX_DEPTH}, and anything that is not one
 * JSON object followed by whitespace. Not validated: the content of strings it skips (control characters, escape
 * sequences); a line JSON.parse would refuse for those alone is judged by what the scanner read.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

/** Bytes of a string walked in JS before the search for its closing quote goes native (Buffer.indexOf). */
const WALK = 256;

/** Deeper nesting than this is left to JSON.parse (no object the API server sends comes close). */
export const MAX_DEPTH = 512;

/** What a watch event shows the shard's checks; each field is JSON.parse's value, or undefined where absent. */
export interface ScannedMetadata {
  namespace?: string;
  name?: string;
  uid?: string;
  resourceVersion?: string;
  /** Present when the object has `metadata.labels`; holds only the keys asked for that it has. */
  labels?: Record<string, string>;
}

export interface ScannedEvent {
  type: string | undefined;
  /** Whether the event has an `object` (always a JSON object: anything else is left to JSON.parse). */
  hasObject: boolean;
  kind: string | undefined;
  apiVersion: string | undefined;
  metadata: ScannedMetadata | undefined;
}

/** One item of a list answer: its bytes [start, end) and what the checks read of it. */
export interface ScannedItem {
  start: number;
  end: number;
  metadata: ScannedMetadata | undefined;
}

export interface ScannedList {
  items: ScannedItem[];
  /** The `[` and `]` of the items array. */
  itemsOpen: number;
  itemsClose: number;
  /** The bytes [start, end) of the list's `metadata` object, if it has one. */
  metadata: [number, number] | undefined;
}

/** Thrown inside the scanner when it is not sure; never escapes {@link EventScanner.scan}. */
const UNSURE: unique symbol = Symbol('unsure');

function ascii(text: string): Buffer {
  if (!/^[\x00-\x7f]*$/u.test(text)) throw new Error(`not ASCII: ${text}`);
  return Buffer.from(text, 'latin1');
}

// Keys read per level, as bytes.
const K_TYPE = ascii('type');
const K_OBJECT = ascii('object');
const K_KIND = ascii('kind');
const K_API_VERSION = ascii('apiVersion');
const K_METADATA = ascii('metadata');
const K_NAMESPACE = ascii('namespace');
const K_NAME = ascii('name');
const K_UID = ascii('uid');
const K_RESOURCE_VERSION = ascii('resourceVersion');
const K_LABELS = ascii('labels');
const K_ITEMS = ascii('items');

const WHITESPACE = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WHITESPACE[c] = 1;

/**
 * A scanner for the label keys one resource's checks read (the hash label, the limits' keys). Build it once per
 * set of keys (route table), reuse it for every event: it keeps no state between calls.
 */
export class EventScanner {
  readonly labelKeys: readonly string[];
  private readonly keys: readonly Buffer[];
  private readonly usable: boolean;
  private b: Buffer = Buffer.alloc(0);
  private p = 0;
  private end = 0;
  /** The bytes [ks, ke) of the key key() read last. */
  private ks = 0;
  private ke = 0;
  /** Whether the string stringEnd delimited last may hold an escape. */
  private escaped = false;

  /** Label keys that are not ASCII cannot be compared as bytes (nor `__proto__` be set): such a scanner always gives up. */
  constructor(labelKeys: readonly string[]) {
    this.labelKeys = labelKeys;
      this.usable = labelKeys.every((k) => /^[\x00-\x7f]*$/u.test(k) && k !== '__proto__');
    this.keys = this.usable ? labelKeys.map((k) => Buffer.from(k, 'latin1')) : [];
  }

  /** The event's fields, or undefined when the scanner is not sure (the caller parses the line). */
  scan(line: Buffer): ScannedEvent | undefined {
    if (!this.usable) return undefined;
    this.b = line;
    this.p = 0;
    this.end = line.length;
    try {
      const event = this.event();
      this.ws();
      if (this.p !== this.end) return undefined;
      return event;
    } catch (err) {
      if (err === UNSURE) return undefined;
      throw err;
    } finally {
      this.b = EMPTY;
    }
  }

  /**
   * A list answer's items, each with its byte range and the fields the checks read, and the byte range of the list's
   * `metadata`; undefined when not sure (as for events), for a Table, or for an answer with no `items` array of
   * objects (the caller parses the answer).
   */
  scanList(body: Buffer): ScannedList | undefined {
    if (!this.usable) return undefined;
    this.b = body;
    this.p = 0;
    this.end = body.length;
    try {
      const list = this.list();
      this.ws();
      if (this.p !== this.end) return undefined;
      return list;
    } catch (err) {
      if (err === UNSURE) return undefined;
      throw err;
    } finally {
      this.b = EMPTY;
    }
  }

  private list(): ScannedList | undefined {
    let items: ScannedItem[] | undefined;
    let itemsOpen = -1;
    let itemsClose = -1;
    let metadata: [number, number] | undefined;
    let seenKind = false;
    this.ws();
    this.expect(LBRACE);
    this.ws();
    if (this.peek() === RBRACE) return undefined;
    for (;;) {
      this.key();
      const start = this.ks;
      const end = this.ke;
      if (same(this.b, start, end, K_ITEMS)) {
        if (items !== undefined) throw UNSURE;
        items = [];
        this.ws();
        itemsOpen = this.p;
        this.expect(LBRACKET);
        this.ws();
        if (this.peek() === RBRACKET) {
          itemsClose = this.p++;
        } else {
          for (;;) {
            this.ws();
            const from = this.p;
            const item: ScannedEvent = { type: undefined, hasObject: true, kind: undefined, apiVersion: undefined, metadata: undefined };
            this.object(item);
            items.push({ start: from, end: this.p, metadata: item.metadata });
            this.ws();
            const c = this.b[this.p];
            if (c === RBRACKET) {
              itemsClose = this.p++;
              break;
            }
            if (c !== COMMA || this.p >= this.end) throw UNSURE;
            this.p++;
          }
        }
      } else if (same(this.b, start, end, K_METADATA)) {
        if (metadata !== undefined) throw UNSURE;
        this.ws();
        const from = this.p;
        if (this.b[from] !== LBRACE) throw UNSURE;
        this.value(1);
        metadata = [from, this.p];
      } else if (same(this.b, start, end, K_KIND)) {
        if (seenKind) throw UNSURE;
        seenKind = true;
        // A Table's rows are judged by the parsing path.
        if (this.stringValue() === 'Table') throw UNSURE;
      } else {
        this.value(1);
      }
      if (this.next()) break;
    }
    if (items === undefined) return undefined;
    return { items, itemsOpen, itemsClose, metadata };
  }

  private event(): ScannedEvent {
    const event: ScannedEvent = { type: undefined, hasObject: false, kind: undefined, apiVersion: undefined, metadata: undefined };
    let seenType = false;
    this.ws();
    this.expect(LBRACE);
    this.ws();
    if (this.peek() === RBRACE) {
      this.p++;
      return event;
    }
    for (;;) {
      this.key();
      const start = this.ks;
      const end = this.ke;
      if (same(this.b, start, end, K_TYPE)) {
        if (seenType) throw UNSURE;
        seenType = true;
        event.type = this.stringValue();
      } else if (same(this.b, start, end, K_OBJECT)) {
        if (event.hasObject) throw UNSURE;
        event.hasObject = true;
        this.object(event);
      } else {
        this.value(1);
      }
      if (this.next()) return event;
    }
  }

  private object(event: ScannedEvent): void {
    this.ws();
    this.expect(LBRACE);
    this.ws();
    if (this.peek() === RBRACE) {
      this.p++;
      return;
    }
    let seenKind = false;
    let seenApiVersion = false;
    for (;;) {
      this.key();
      const start = this.ks;
      const end = this.ke;
      if (same(this.b, start, end, K_KIND)) {
        if (seenKind) throw UNSURE;
        seenKind = true;
        event.kind = this.stringValue();
      } else if (same(this.b, start, end, K_API_VERSION)) {
        if (seenApiVersion) throw UNSURE;
        seenApiVersion = true;
        event.apiVersion = this.stringValue();
      } else if (same(this.b, start, end, K_METADATA)) {
        if (event.metadata !== undefined) throw UNSURE;
        event.metadata = this.metadata();
      } else {
        this.value(2);
      }
      if (this.next()) return;
    }
  }

  private metadata(): ScannedMetadata {
    const metadata: ScannedMetadata = {};
    this.ws();
    this.expect(LBRACE);
    this.ws();
    if (this.peek() === RBRACE) {
      this.p++;
      return metadata;
    }
    for (;;) {
      this.key();
      const start = this.ks;
      const end = this.ke;
      const b = this.b;
      if (same(b, start, end, K_NAMESPACE)) {
        if (metadata.namespace !== undefined) throw UNSURE;
        metadata.namespace = this.stringValue();
      } else if (same(b, start, end, K_NAME)) {
        if (metadata.name !== undefined) throw UNSURE;
        metadata.name = this.stringValue();
      } else if (same(b, start, end, K_UID)) {
        if (metadata.uid !== undefined) throw UNSURE;
        metadata.uid = this.stringValue();
      } else if (same(b, start, end, K_RESOURCE_VERSION)) {
        if (metadata.resourceVersion !== undefined) throw UNSURE;
        metadata.resourceVersion = this.stringValue();
      } else if (same(b, start, end, K_LABELS)) {
        if (metadata.labels !== undefined) throw UNSURE;
        metadata.labels = this.labels();
      } else {
        this.value(3);
      }
      if (this.next()) return metadata;
    }
  }

  private labels(): Record<string, string> {
    const labels: Record<string, string> = {};
    this.ws();
    this.expect(LBRACE);
    this.ws();
    if (this.peek() === RBRACE) {
      this.p++;
      return labels;
    }
    const keys = this.keys;
    for (;;) {
      this.key();
      const start = this.ks;
      const end = this.ke;
      let wanted = -1;
      for (let i = 0; i < keys.length; i++) {
        if (same(this.b, start, end, keys[i]!)) {
          wanted = i;
          break;
        }
      }
      if (wanted >= 0) {
        const name = this.labelKeys[wanted]!;
        if (Object.hasOwn(labels, name)) throw UNSURE;
        labels[name] = this.stringValue();
      } else {
        this.value(4);
      }
      if (this.next()) return labels;
    }
  }

  /**
   * A key at a level the scanner reads: its bytes [ks, ke) between the quotes, then the colon. A key written
   * with an escape might spell one the scanner reads: not sure.
   */
  private key(): void {
    this.ws();
    if (this.peek() !== QUOTE) throw UNSURE;
    const start = this.p + 1;
    const close = this.stringEnd(this.p);
    if (this.escaped) throw UNSURE;
    this.ks = start;
    this.ke = close;
    this.p = close + 1;
    this.ws();
    this.expect(COLON);
  }

  /** After a member: true at the object's end, false after a comma. */
  private next(): boolean {
    this.ws();
    const c = this.peek();
    this.p++;
    if (c === COMMA) return false;
    if (c === RBRACE) return true;
    throw UNSURE;
  }

  /** A string value the scanner reads; any other type is not sure. */
  private stringValue(): string {
    this.ws();
    const open = this.p;
    const b = this.b;
    if (b[open] !== QUOTE) throw UNSURE;
    const close = this.stringEnd(open);
    this.p = close + 1;
    if (this.escaped) {
      try {
        return JSON.parse((b as SliceableBuffer).utf8Slice(open, close + 1)) as string;
      } catch {
        throw UNSURE;
      }
    }
    // The event types, as the constants they are (no string made per event).
    if (b[open + 1] === 0x41 && same(b, open + 1, close, ADDED)) return 'ADDED';
    if (b[open + 1] === 0x4d && same(b, open + 1, close, MODIFIED)) return 'MODIFIED';
    return (b as SliceableBuffer).utf8Slice(open + 1, close);
  }

  /** Skips one value of any type, checking its grammar (but not the content of its strings). */
  private value(depth: number): void {
    if (depth > MAX_DEPTH) throw UNSURE;
    this.ws();
    const b = this.b;
    const c = b[this.p];
    if (c === QUOTE) {
      this.p = this.stringEnd(this.p) + 1;
    } else if (c === LBRACE) {
      this.p++;
      this.ws();
      if (b[this.p] === RBRACE) {
        this.p++;
        return;
      }
      for (;;) {
        this.ws();
        if (b[this.p] !== QUOTE) throw UNSURE;
        this.p = this.stringEnd(this.p) + 1;
        this.ws();
        this.expect(COLON);
        this.value(depth + 1);
        if (this.next()) return;
      }
    } else if (c === LBRACKET) {
      this.p++;
      this.ws();
      if (b[this.p] === RBRACKET) {
        this.p++;
        return;
      }
      for (;;) {
        this.value(depth + 1);
        this.ws();
        const d = b[this.p++];
        if (d === RBRACKET) return;
        if (d !== COMMA) throw UNSURE;
      }
    } else if (c === 0x74) {
      this.literal(TRUE);
    } else if (c === 0x66) {
      this.literal(FALSE);
    } else if (c === 0x6e) {
      this.literal(NULL);
    } else {
      this.number();
    }
  }

  private literal(word: Buffer): void {
    if (this.p + word.length > this.end || !same(this.b, this.p, this.p + word.length, word)) throw UNSURE;
    this.p += word.length;
  }

  /** -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
  private number(): void {
    const b = this.b;
    let p = this.p;
    if (b[p] === MINUS) p++;
    if (b[p] === ZERO) p++;
    else if (isDigit(b[p])) while (isDigit(b[p])) p++;
    else throw UNSURE;
    if (b[p] === DOT) {
      p++;
      if (!isDigit(b[p])) throw UNSURE;
      while (isDigit(b[p])) p++;
    }
    if (b[p] === 0x65 || b[p] === 0x45) {
      p++;
      if (b[p] === PLUS || b[p] === MINUS) p++;
      if (!isDigit(b[p])) throw UNSURE;
      while (isDigit(b[p])) p++;
    }
    this.p = p;
  }

  /**
   * The index of the quote closing the string opened at `open`: the first quote after it preceded by an even number
   * of backslashes. Strings are walked here; past WALK bytes the search goes native (a call costs about as much as walking a hundred bytes).
   */
  private stringEnd(open: number): number {
    const b = this.b;
    const end = this.end;
    let i = open + 1;
    this.escaped = false;
    const walk = Math.min(end, i + WALK);
    while (i < walk) {
      const c = b[i];
      if (c === QUOTE) return i;
      if (c === BACKSLASH) {
        this.escaped = true;
        i += 2;
      } else {
        i++;
      }
    }
    if (i >= end) throw UNSURE;
    // Past the walk, escapes are not looked for: a long value read is decoded by JSON.parse.
    this.escaped = true;
    for (;;) {
      const q = b.indexOf(QUOTE, i);
      if (q < 0 || q >= end) throw UNSURE;
      let k = q - 1;
      while (k >= i && b[k] === BACKSLASH) k--;
      // Backslashes before the walk's end were paired by the walk, so counting from `i` is enough.
      if ((q - 1 - k) % 2 === 0) return q;
      i = q + 1;
    }
  }

  private ws(): void {
    const b = this.b;
    let p = this.p;
    while (p < this.end && WHITESPACE[b[p]!] === 1) p++;
    this.p = p;
  }

  private peek(): number | undefined {
    return this.p < this.end ? this.b[this.p] : undefined;
  }

  private expect(c: number): void {
    if (this.b[this.p] !== c || this.p >= this.end) throw UNSURE;
    this.p++;
  }
}

const EMPTY = Buffer.alloc(0);
const ADDED = ascii('ADDED');
const MODIFIED = ascii('MODIFIED');

/** Node's own slicing methods (what toString calls after checking its arguments). */
interface SliceableBuffer extends Buffer {
  utf8Slice(start: number, end: number): string;
}
const TRUE = ascii('true');
const FALSE = ascii('false');
const NULL = ascii('null');

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= ZERO && c <= NINE;
}

/** Whether b[start, end) holds exactly the bytes of `word`. */
function same(b: Buffer, start: number, end: number, word: Buffer): boolean {
  if (end - start !== word.length) return false;
  for (let i = 0; i < word.length; i++) if (b[start + i] !== word[i]) return false;
  return true;
}
