/**
 * The pod's labels as the downward API writes them (a `downwardAPI` volume item of `metadata.labels`): one line per
 * label, `key="value"`, the value quoted as Go's `%q` quotes it, keys sorted. Pure: reading the file is
 * pod-labels-file.ts's job.
 */

/** Larger than any real label set (keys are at most 317 bytes, values 63, quoted up to 4x): refused. */
export const MAX_POD_LABELS_BYTES = 256 * 1024;

export type PodLabelsParse = { ok: true; labels: Record<string, string> } | { ok: false; problems: string[] };

const SIMPLE_ESCAPES: Record<string, number> = { a: 7, b: 8, f: 12, n: 10, r: 13, t: 9, v: 11, '\\': 92, '"': 34 };
const HEX = /^[0-9a-fA-F]+$/;
const OCTAL = /^[0-7]{3}$/;

/** A Go double-quoted string literal (strconv.Unquote), or undefined when it is not one. */
export function unquoteGo(quoted: string): string | undefined {
  if (quoted.length < 2 || !quoted.startsWith('"') || !quoted.endsWith('"')) return undefined;
  const body = quoted.slice(1, -1);
  const bytes: number[] = [];
  const pushText = (text: string): void => {
    for (const byte of Buffer.from(text, 'utf8')) bytes.push(byte);
  };
  for (let i = 0; i < body.length; ) {
    const ch = body[i] as string;
    if (ch === '"' || ch === '\n') return undefined;
    if (ch !== '\\') {
      const code = body.codePointAt(i) as number;
      pushText(String.fromCodePoint(code));
      i += code > 0xffff ? 2 : 1;
      continue;
    }
    const kind = body[i + 1];
    if (kind === undefined) return undefined;
    const simple = SIMPLE_ESCAPES[kind];
    if (simple !== undefined) {
      bytes.push(simple);
      i += 2;
    } else if (kind === 'x') {
      const hex = body.slice(i + 2, i + 4);
      if (hex.length !== 2 || !HEX.test(hex)) return undefined;
      bytes.push(Number.parseInt(hex, 16));
      i += 4;
    } else if (kind === 'u' || kind === 'U') {
      const width = kind === 'u' ? 4 : 8;
      const hex = body.slice(i + 2, i + 2 + width);
      if (hex.length !== width || !HEX.test(hex)) return undefined;
      const code = Number.parseInt(hex, 16);
      if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return undefined;
      pushText(String.fromCodePoint(code));
      i += 2 + width;
    } else if (kind >= '0' && kind <= '7') {
      const octal = body.slice(i + 1, i + 4);
      if (!OCTAL.test(octal) || Number.parseInt(octal, 8) > 255) return undefined;
      bytes.push(Number.parseInt(octal, 8));
      i += 4;
    } else {
      return undefined;
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
  } catch {
    return undefined;
  }
}

/**
 * Parses the file's text. Every line that is not `key="value"` (an empty line aside), a key given twice, and a file
 * larger than MAX_POD_LABELS_BYTES are problems: the whole file is then refused, never half read.
 */
export function parsePodLabels(text: string): PodLabelsParse {
  const size = Buffer.byteLength(text, 'utf8');
  if (size > MAX_POD_LABELS_BYTES) return { ok: false, problems: [`${size} bytes, more than the ${MAX_POD_LABELS_BYTES} a label file can hold`] };
  const labels: Record<string, string> = {};
  const problems: string[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') return;
    const at = `line ${index + 1}`;
    const eq = line.indexOf('=');
    const key = eq > 0 ? line.slice(0, eq) : '';
    const value = eq > 0 ? unquoteGo(line.slice(eq + 1)) : undefined;
    if (key === '' || /\s/.test(key)) problems.push(`${at}: not key="value"`);
    else if (value === undefined) problems.push(`${at}: the value of ${key} is not a Go-quoted string`);
    else if (Object.hasOwn(labels, key)) problems.push(`${at}: ${key} is given twice`);
    else labels[key] = value;
  });
  return problems.length ? { ok: false, problems } : { ok: true, labels };
}
