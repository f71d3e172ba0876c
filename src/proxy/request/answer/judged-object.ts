import type { FastifyReply } from 'fastify';
import type { ClusterEntry } from '../../routes/route-state.js';
import { OBJECT_MAX_BYTES, metadataOf, notServed } from '../judgement/object-write.js';
import { statusFor, type KubeStatus } from '../judgement/status.js';
import { readBoundedBody, type ResourceRequest } from '../parse/index.js';
import type { UpstreamResponse } from './forward.js';

/**
 * The answer to a read of one object sharded by uid: passed on when the shard owns the object, 404 otherwise (as
 * for an object of another shard's namespace). Only JSON answers are read; anything else is refused, never passed.
 */
export function sendJudgedObject(options: { reply: FastifyReply; res: UpstreamResponse; entry: ClusterEntry; info: ResourceRequest; shard: string }): void {
  const { reply, res, entry, info, shard } = options;
  const answer = (status: KubeStatus): void => {
    reply.code(status.code).removeHeader('content-length').removeHeader('content-encoding');
    void reply.type('application/json').send(JSON.stringify(status));
  };
  if (reply.getHeader('content-encoding') !== undefined) {
    res.stream.destroy();
    return answer(statusFor(502, 'the proxy must read this object and the API server sent it encoded'));
  }
  readBoundedBody(res.stream, OBJECT_MAX_BYTES).then(
    (text) => {
      const metadata = metadataOf(text);
      if (metadata === undefined) return answer(statusFor(502, 'the proxy must read this object and cannot: the answer is not a JSON object'));
      if (!entry.view.admits(info.group, info.resource, metadata)) return answer(notServed(info, entry, shard));
      reply.removeHeader('content-length');
      void reply.send(text);
    },
    (err: unknown) => {
      res.stream.destroy();
      answer(statusFor(502, `the proxy must read this object and cannot: ${(err as Error).message}`));
    },
  );
}
