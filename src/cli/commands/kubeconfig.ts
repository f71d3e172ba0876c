import { writeFile } from 'node:fs/promises';
import { FileError, UsageError } from '../../errors.js';
import { operatorKubeconfig, readRouteTableFile } from '../../proxy/index.js';
import { intValue, requiredString, stringValue, type Command } from '../command.js';

export const kubeconfigCommand: Command = {
  name: 'kubeconfig',
  summary: "Write the kubeconfig an operator uses behind its ctrlmesh proxy (a context per reachable cluster).",
  usage: '--route-table FILE [--proxy-host HOST] [--port PORT] [--out FILE]',
  details:
    'The current context is the shard\'s home cluster at http://HOST:PORT; every other cluster of the route table\n' +
    'gets a context named after it at http://HOST:PORT/clusters/NAME. The file holds no credentials: the proxy does.\n' +
    'FILE is a route table, or the proxy\'s stored state (--store of `ctrlmesh proxy`).',
  options: {
    'route-table': { type: 'string', valueName: 'FILE', description: 'route table (or the proxy\'s stored state) to read the clusters from' },
    'proxy-host': { type: 'string', valueName: 'HOST', description: 'address the proxy listens on (default 127.0.0.1)' },
    port: { type: 'string', valueName: 'PORT', description: 'the proxy\'s API port (default 5443)' },
    out: { type: 'string', valueName: 'FILE', description: 'write here instead of stdout' },
  },
  run: async (ctx) => {
    const table = await readRouteTableFile(requiredString(ctx, 'route-table'));
    const host = stringValue(ctx, 'proxy-host') ?? '127.0.0.1';
    if (!/^[A-Za-z0-9.:[\]-]+$/.test(host)) throw new UsageError(`--proxy-host "${host}" is not a host name or address`);
    const port = intValue(ctx, 'port', 5443, { minimum: 1, maximum: 65535 });
    const text = operatorKubeconfig(table, `http://${host}:${port}`);
    const out = stringValue(ctx, 'out');
    if (out === undefined) {
      ctx.stdout.write(text);
    } else {
      await writeFile(out, text).catch((err: unknown) => {
        throw new FileError(out, `cannot write the kubeconfig (${(err as Error).message})`, { cause: err });
      });
      ctx.logger.info({ out, contexts: table.clusters.length, home: table.homeCluster }, 'kubeconfig written');
    }
    return 0;
  },
};
