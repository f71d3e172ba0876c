import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Whether a request's answer waits behind an unfinished one on its connection: HTTP/1.1 pipelining. Node parses and
 * dispatches such a request at once and gives its response the connection only when the answers before it ended;
 * until then the response has no socket, and it neither closes nor is destroyed when the client leaves.
 */
export function isPipelined(res: ServerResponse): boolean {
  return res.socket === null;
}

/**
 * Resolves true when a pipelined request's turn comes (its response got the connection), false when its client left
 * first. The API server's Go server reads a pipelined request only at its turn: the proxy judges and forwards it only
 * then too, so a client that leaves has nothing of it on its way (an attacker probe, session 18, found such requests
 * forwarded and their calls never ended: writes held back every later table's acknowledgement, a half-open breaker
 * refused its cluster for good, watches stayed open on the API server).
 */
export function untilTurn(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  if (req.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const turn = (): void => {
      req.off('close', gone);
      resolve(true);
    };
    const gone = (): void => {
      res.off('socket', turn);
      resolve(false);
    };
    res.once('socket', turn);
    req.once('close', gone);
  });
}
