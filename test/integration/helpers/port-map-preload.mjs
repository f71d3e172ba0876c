// Loaded into a proxy child process with `node --import` (test/integration/helpers/faults.ts, ProxyProcess): every TCP
// connection to 127.0.0.1:PORT whose PORT is in $CTRLMESH_TEST_PORT_MAP ({"from": to}) goes to the mapped port
// instead. The fault suite maps each NATS server's port to a relay it controls, so the servers a NATS client learns
// from the cluster (INFO connect_urls, sent inside TLS) are reached through the relays too: a partition stays one.
import net from 'node:net';

const map = JSON.parse(process.env.CTRLMESH_TEST_PORT_MAP ?? '{}');
const LOOPBACK = new Set([undefined, '127.0.0.1', 'localhost']);
const original = net.Socket.prototype.connect;

net.Socket.prototype.connect = function connect(...args) {
  // net.connect() hands over its normalized arguments as an array [options, callback].
  const options = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (options !== null && typeof options === 'object' && options.port !== undefined && LOOPBACK.has(options.host)) {
    const to = map[String(options.port)];
    if (to !== undefined) options.port = to;
  }
  return original.apply(this, args);
};
