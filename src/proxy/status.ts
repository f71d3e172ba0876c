/**
 * Kubernetes `Status` bodies for the answers the proxy gives itself, so client-go and client-node parse them
 * as they parse the API server's own (reason, code and details drive their error types).
 */
export type StatusReason = 'NotFound' | 'Forbidden' | 'ServiceUnavailable' | 'TooManyRequests' | 'ExpectationFailed' | 'InternalError';

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
