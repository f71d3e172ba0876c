import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Requests that may wait their turn on one connection. Each waiting one holds its request in memory, and behind a
 * watch the turn may never come: a connection that queues more is closed, its waiting requests with it. No
 * Kubernetes client pipelines at all.
 */
export const MAX_WAITING_PER_CONNECTION = 32;

const waiting = new WeakMap<Socket, number>();

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
 * first or its connection queued too many. The API server's Go server reads a pipelined request only at its turn:
 * the proxy judges and forwards it only then too, so a client that leaves has nothing of it on its way (forwarded,
 * such requests' calls never ended: writes held back every later table's acknowledgement, a half-open breaker refused
 * its cluster for good, watches stayed open on the API server; test/integration/proxy-client-gone.test.ts).
 */
export function untilTurn(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const socket = req.socket;
  if (req.destroyed) return Promise.resolve(false);
  const queued = (waiting.get(socket) ?? 0) + 1;
  if (queued > MAX_WAITING_PER_CONNECTION) {
    socket.destroy();
    return Promise.resolve(false);
  }
  waiting.set(socket, queued);
  return new Promise((resolve) => {
    const settle = (turn: boolean): void => {
      res.off('socket', onTurn);
      req.off('close', onGone);
      waiting.set(socket, (waiting.get(socket) ?? 1) - 1);
      resolve(turn);
    };
    const onTurn = (): void => settle(true);
    const onGone = (): void => settle(false);
    res.once('socket', onTurn);
    req.once('close', onGone);
  });
}

const unanswered = new WeakMap<Socket, number>();

/**
 * Counts each connection's requests whose answer has not ended yet, for `answering`. Node hands an upgrade's socket
 * to its handler as soon as its head is parsed, even behind unanswered requests on the connection.
 */
export function countAnswers(server: Server): void {
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    unanswered.set(socket, (unanswered.get(socket) ?? 0) + 1);
    res.once('close', () => unanswered.set(socket, (unanswered.get(socket) ?? 1) - 1));
  });
}

/** Whether a request on this connection is still being answered (counted by countAnswers). */
export function answering(socket: Socket): boolean {
  return (unanswered.get(socket) ?? 0) > 0;
}
