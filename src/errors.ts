/**
 * Every error ControllerMesh raises on purpose carries a stable code listed here (and in docs/errors.md),
 * so users and tests can match on the code rather than on the wording.
 */
export const ErrorCodes = {
  /** A command-line flag or argument is wrong. */
  USAGE: 'CM_USAGE',
  /** A file named on the command line cannot be read or parsed. */
  FILE: 'CM_FILE',
  /** A manifest does not satisfy its schema; the message names every field at fault. */
  INVALID_MANIFEST: 'CM_INVALID_MANIFEST',
  /** A label selector (query-string form) cannot be parsed; the message shows where. */
  INVALID_SELECTOR: 'CM_INVALID_SELECTOR',
  /** A configuration object (hash settings, planner input) is out of range; the message names the field. */
  INVALID_CONFIG: 'CM_INVALID_CONFIG',
  /** A TypeBox schema has no structural CRD equivalent (a bug in ControllerMesh's schemas, caught by the CRD test). */
  SCHEMA: 'CM_SCHEMA',
  /** A tool (kube-apiserver, etcd, nats-server, helm) cannot be found or built. */
  TOOL: 'CM_TOOL',
  /** A server of the local test bed did not start or did not become ready. */
  TESTBED: 'CM_TESTBED',
  /** A message to send does not satisfy its schema (a bug in the sender). */
  MESSAGE: 'CM_MESSAGE',
  /** NATS or JetStream refused or failed an operation (connection, bucket, request). */
  NATS: 'CM_NATS',
  /** The hub's status API cannot be reached or answered with an error. */
  HUB_UNREACHABLE: 'CM_HUB_UNREACHABLE',
  /** The hub refused an agent's registration (wrong token, bad identity). */
  REGISTRATION: 'CM_REGISTRATION',
  /** The proxy refused a request it cannot judge with certainty (the answer is a Kubernetes Status saying why). */
  PROXY_REQUEST: 'CM_PROXY_REQUEST',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export class CtrlmeshError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CtrlmeshError';
    this.code = code;
  }
}

/** A mistake in how a command was called: printed as one line, exit code 2. */
export class UsageError extends CtrlmeshError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCodes.USAGE, message, options);
    this.name = 'UsageError';
  }
}

/** A file named by the user cannot be read or parsed: printed as one line, exit code 2. */
export class FileError extends CtrlmeshError {
  constructor(path: string, reason: string, options?: { cause?: unknown }) {
    super(ErrorCodes.FILE, `${path}: ${reason}`, options);
    this.name = 'FileError';
  }
}

/** A label selector in query-string form cannot be parsed; the message shows the text and the position. */
export class SelectorSyntaxError extends CtrlmeshError {
  constructor(text: string, position: number, reason: string) {
    super(ErrorCodes.INVALID_SELECTOR, `label selector "${text}" at character ${position + 1}: ${reason}`);
    this.name = 'SelectorSyntaxError';
  }
}

/** A configuration object (hash settings, planner input, a signing key) is out of range; the message names the field. */
export class InvalidConfigError extends CtrlmeshError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCodes.INVALID_CONFIG, message, options);
    this.name = 'InvalidConfigError';
  }
}

/** The hub refused an agent's registration (or it was aborted); the message carries the hub's explanation. */
export class RegistrationError extends CtrlmeshError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCodes.REGISTRATION, message, options);
    this.name = 'RegistrationError';
  }
}

/** A TypeBox schema cannot be turned into a structural CRD schema: a bug in ControllerMesh, not in a manifest. */
export class SchemaError extends CtrlmeshError {
  constructor(message: string) {
    super(ErrorCodes.SCHEMA, message);
    this.name = 'SchemaError';
  }
}

/** A test server binary cannot be found or built; the message says which tool and what to install or set. */
export class ToolError extends CtrlmeshError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCodes.TOOL, message, options);
    this.name = 'ToolError';
  }
}

/** A server of the local test bed did not start or did not become ready; the message names it and shows its log. */
export class TestbedError extends CtrlmeshError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCodes.TESTBED, message, options);
    this.name = 'TestbedError';
  }
}

/** A body the proxy had to read was larger than it reads: answered 413, the rest never read. */
export class BodyTooLargeError extends CtrlmeshError {
  constructor(readonly limit: number) {
    super(ErrorCodes.PROXY_REQUEST, `the request body is larger than ${limit} bytes, the most the proxy reads to judge a request`);
    this.name = 'BodyTooLargeError';
  }
}

/** An API server sent no response head within the proxy's wait: answered 504, and counted against its breaker. */
export class UpstreamTimeoutError extends CtrlmeshError {
  constructor(readonly timeoutMs: number) {
    super(ErrorCodes.PROXY_REQUEST, `no answer within ${timeoutMs} ms`);
    this.name = 'UpstreamTimeoutError';
  }
}

/**
 * The client's request did not arrive whole while the proxy forwarded it (the client left, or sent a malformed
 * body): answered 400 where it can still be, and not counted against the API server's breaker.
 */
export class ClientRequestError extends CtrlmeshError {
  constructor(options?: { cause?: unknown }) {
    super(ErrorCodes.PROXY_REQUEST, 'the request did not arrive whole', options);
    this.name = 'ClientRequestError';
  }
}

/** A list answer the proxy had to filter itself but could not read (too large, not JSON, compressed): never passed on. */
export class UnjudgedListError extends CtrlmeshError {
  constructor(reason: string) {
    super(ErrorCodes.PROXY_REQUEST, `the proxy must filter this list itself and cannot: ${reason}`);
    this.name = 'UnjudgedListError';
  }
}

/**
 * A body the proxy must read to judge a request (a leader-election lock's) is one it cannot read with certainty: a
 * media type it does not read (415), or a body that is malformed or ambiguous in its own (400). Never forwarded.
 */
export class UnreadableBodyError extends CtrlmeshError {
  constructor(readonly statusCode: 400 | 415, message: string) {
    super(ErrorCodes.PROXY_REQUEST, message);
    this.name = 'UnreadableBodyError';
  }
}
