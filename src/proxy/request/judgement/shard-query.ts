import { SelectorSyntaxError } from '../../../errors.js';
import type { ClusterEntry } from '../../routes/route-state.js';
import type { ResourceSelection } from '../../routes/shard-view.js';
import { jsonAccept } from './accept.js';
import type { QueryParams, ResourceRequest } from '../parse/index.js';
import { statusFor, type KubeStatus } from './status.js';

/**
 * Puts the shard's selection into the query of a sharded list, watch or collection delete: its labels ANDed with the
 * client's `labelSelector`, and its `shardSelector` where the cluster's objects carry no shard labels. Returns the
 * selection, or the Status that refuses a request it cannot be put into.
 */
export function shardQuery(entry: ClusterEntry, info: ResourceRequest, query: QueryParams): ResourceSelection | KubeStatus {
  const selection = entry.view.selectionFor(info.group, info.resource);
  const unlabelled = selection.shardSelector !== undefined || selection.filterLists;
  if (unlabelled && info.verb === 'deletecollection') {
    // Nothing labelled: only a list the proxy reads can be judged, and a collection delete answers no list first.
    return statusFor(403, `deleting a collection of ${info.resource} cannot be judged in cluster "${entry.view.name}", whose objects carry no shard labels: delete them one by one`);
  }
  if (unlabelled && query.count('shardSelector') > 0) {
    return statusFor(400, 'shardSelector: the proxy sends its own shard selector and cannot combine it with the client\'s');
  }
  try {
    const labels = entry.view.selectorWith(info.group, info.resource, query.get('labelSelector'));
    if (labels === '') query.delete('labelSelector');
    else query.set('labelSelector', labels);
  } catch (err) {
    if (err instanceof SelectorSyntaxError) return statusFor(400, `labelSelector: ${err.message}`);
    throw err;
  }
  if (selection.shardSelector !== undefined) query.set('shardSelector', selection.shardSelector);
  return selection;
}

/**
 * The Accept sent for an answer the proxy reads (a sharded watch's events, a list it filters, an object it judges):
 * only the client's JSON media types (Tables and metadata-only objects, so kubectl keeps its columns), or plain JSON
 * when it asked for none (protobuf clients read JSON).
 */
export function readableAccept(query: QueryParams, clientAccept: string | undefined): string {
  const wanted = jsonAccept(clientAccept);
  // Table rows must carry each object's labels and namespace for the filter to judge them.
  if (wanted.table && query.get('includeObject') === 'None') query.set('includeObject', 'Metadata');
  return wanted.accept;
}
