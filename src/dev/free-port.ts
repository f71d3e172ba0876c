import { createServer } from 'node:net';

// Ports handed out by this process, so two servers started back to back never get the same one.
const handedOut = new Set<number>();

/** A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it; we bind and release it). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => (address && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port assigned'))));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}
