import { createServer as createNkey } from '@nats-io/nkeys';
import type { Logger } from 'pino';
import { Fleet } from '../../../src/hub/fleet.js';
import { MESSAGE_SCHEMA_VERSION, routeSigner } from '../../../src/transport/index.js';

/** A hub's state with one registered cluster `a`, and a fresh route-signing key the fleet trusts. */
export function fleetWithClusterA(logger: Logger): { fleet: Fleet; signer: ReturnType<typeof routeSigner> } {
  const signer = routeSigner(new TextDecoder().decode(createNkey().getSeed()));
  const fleet = new Fleet(logger, [signer.publicKey]);
  fleet.recordRegistration({
    schema: MESSAGE_SCHEMA_VERSION,
    cluster: { name: 'a', labels: {}, server: 'https://a:6443', caPem: 'CA' },
    registeredAt: '2026-01-01T00:00:00Z',
    updatedAt: '2026-01-01T00:00:00Z',
  });
  return { fleet, signer };
}
