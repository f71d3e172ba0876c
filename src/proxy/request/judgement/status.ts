/**
 * Kubernetes `Status` bodies for the answers the proxy gives itself, so client-go and client-node parse them
 * as they parse the API server's own (reason, code and details drive their error types).
 */
export type StatusReason =
  | 'BadRequest'
  | 'NotFound'
  | 'Forbidden'
  | 'MethodNotAllowed'
  | 'Conflict'
  | 'Expired'
  | 'RequestEntityTooLarge'
  | 'UnsupportedMediaType'
  | 'ServiceUnavailable'
  | 'TooManyRequests'
  | 'ExpectationFailed'
  | 'Timeout'
  | 'InternalError';

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  retryAfterSeconds?: number;
}

export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: StatusReason;
  details?: StatusDetails;
  code: number;
}

export function statusBody(code: number, reason: StatusReason, message: string, details?: StatusDetails): KubeStatus {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

const REASONS: Readonly<Record<number, StatusReason>> = {
  400: 'BadRequest',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  408: 'Timeout',
  409: 'Conflict',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  // Headers over Node's limit: a client's error, for which Kubernetes has no reason of its own.
  431: 'BadRequest',
  417: 'ExpectationFailed',
  429: 'TooManyRequests',
  503: 'ServiceUnavailable',
};

/** The reason the API server gives with a code (InternalError for codes it has no reason for). */
export function reasonFor(code: number): StatusReason {
  return REASONS[code] ?? 'InternalError';
}

/** A Status body with the reason that goes with its code. */
export function statusFor(code: number, message: string, details?: StatusDetails): KubeStatus {
  return statusBody(code, reasonFor(code), message, details);
}

/** The refusal of a request whose route table changed, or whose lease ended, between its judgement and its sending. */
export function tableChanged(): KubeStatus {
  return statusFor(503, 'the route table this request was judged by changed or its lease ended meanwhile; retry');
}
