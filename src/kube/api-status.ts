import { ApiException } from '@kubernetes/client-node';

/** Whether a client call failed with this HTTP status from the API server (e.g. 404 gone, 409 exists). */
export function isApiStatus(err: unknown, status: number): boolean {
  return err instanceof ApiException && err.code === status;
}
