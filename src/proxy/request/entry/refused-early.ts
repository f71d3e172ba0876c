import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { statusFor } from '../judgement/status.js';
import { endWithStatus } from '../answer/send-status.js';

/**
 * Answers to requests Node's HTTP server refuses before any route sees them, as Status bodies like every answer of
 * the proxy's own: what its parser cannot read (400), heads over its size limit (431), a request not sent whole within
 * the read timeout (408), an `Expect` other than 100-continue (417) and CONNECT (405, the API server serves none).
 */

/** The code and message for an error Node's HTTP server reports on a connection (its `clientError`). */
function clientErrorStatus(err: NodeJS.ErrnoException): { code: number; message: string } {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return { code: 408, message: 'the request was not sent whole within the proxy\'s read timeout' };
  if (err.code === 'HPE_HEADER_OVERFLOW') return { code: 431, message: 'the request line and headers are larger than the proxy reads' };
  return { code: 400, message: 'the request is not HTTP the proxy can read' };
}

/** fastify's `clientErrorHandler`: the connection cannot carry another request, so it is closed after the answer. */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // The client went away, or an answer has begun on this connection (a body still arriving while the API server's
  // answer streams): a second head would corrupt it. Node's own handler makes the same check on the same field.
  const answering = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage?.headersSent === true;
  if (err.code === 'ECONNRESET' || !socket.writable || answering) {
    socket.destroy(err);
    return;
  }
  const { code, message } = clientErrorStatus(err);
  endWithStatus(socket, statusFor(code, message));
}

/** The server's `checkExpectation`: an `Expect` the proxy would have to honour for the API server. */
export function answerExpectation(request: IncomingMessage, response: ServerResponse): void {
  const body = JSON.stringify(statusFor(417, `Expect: ${String(request.headers.expect)} is not served through the proxy`));
  response.writeHead(417, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

/** The server's `connect`: CONNECT is a tunnel, and the API server serves none. */
export function answerConnect(_request: IncomingMessage, socket: Duplex): void {
  endWithStatus(socket, statusFor(405, 'method CONNECT is not served through the proxy'));
}
