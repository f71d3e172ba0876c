import { execFile, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { packageRoot } from '../../src/dev/package-root.js';
import { execIn, type Clients } from './kube.js';

const run = promisify(execFile);

/** The outcome of one TCP connect from inside a pod: `connected`, or the error's code (ECONNREFUSED, ETIMEDOUT, ...). */
export type ConnectOutcome = string;

/** Each `host:port` the pod's container tried, with what came of it (each attempt gives up after 3 s). */
export async function connectFrom(c: Clients, namespace: string, pod: string, container: string, targets: readonly string[]): Promise<Map<string, ConnectOutcome>> {
  // Runs in the pod's own node (the images ship /usr/local/bin/node); prints one JSON object.
  const script = `
const net = require('node:net');
const attempt = (target) => new Promise((resolve) => {
  const i = target.lastIndexOf(':');
  const socket = net.connect({ host: target.slice(0, i), port: Number(target.slice(i + 1)) });
  const done = (outcome) => { socket.destroy(); resolve([target, outcome]); };
  socket.setTimeout(3000, () => done('ETIMEDOUT'));
  socket.once('connect', () => done('connected'));
  socket.once('error', (err) => done(err.code ?? err.message));
});
Promise.all(${JSON.stringify(targets)}.map(attempt)).then((r) => process.stdout.write(JSON.stringify(Object.fromEntries(r))));
`;
  const result = await execIn(c, namespace, pod, container, ['/usr/local/bin/node', '-e', script]);
  if (result.code !== 0) throw new Error(`connect probe in ${namespace}/${pod} exited ${result.code}: ${result.stderr}`);
  return new Map(Object.entries(JSON.parse(result.stdout) as Record<string, string>));
}

/** What an operator container found to authenticate with, and what the API server answered to each. */
export interface OwnCallsReport {
  /** Where each credential was found (a file, an env var); the token itself is not reported. */
  credentials: string[];
  /** `<server> <credential or none>` → the HTTP status, or the connection error's code. */
  answers: Record<string, string>;
}

/**
 * From inside a container, calls the API server directly (the `kubernetes` Service from the pod's env, and the given
 * servers) with no credentials and with every bearer token the container can read: the ServiceAccount token paths,
 * env vars whose name says token, and `token:` entries of any kubeconfig under /var/run. The calls skip verifying
 * the server's certificate, as a container going around the proxy would: whether it reached the API server must not
 * depend on which CA it found, only whether the API server let it in.
 */
export async function ownApiCalls(c: Clients, namespace: string, pod: string, container: string, servers: readonly string[], path: string): Promise<OwnCallsReport> {
  const script = `
const fs = require('node:fs');
const https = require('node:https');
const found = [];
for (const p of ['/var/run/secrets/kubernetes.io/serviceaccount/token', '/run/secrets/kubernetes.io/serviceaccount/token']) {
  try { found.push([p, fs.readFileSync(p, 'utf8').trim()]); } catch {}
}
for (const [k, v] of Object.entries(process.env)) if (/token/i.test(k) && v) found.push(['env ' + k, v]);
const walk = (dir, depth) => {
  let entries = [];
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
  for (const e of entries) {
    const p = dir + '/' + e.name;
    if (e.isDirectory() && depth < 4) walk(p, depth + 1);
    else if (e.isFile()) {
      let text = '';
      try { text = fs.readFileSync(p, 'utf8'); } catch { continue; }
      for (const m of text.matchAll(/^\\s*token:\\s*(\\S+)/gm)) found.push([p, m[1]]);
    }
  }
};
walk('/var/run', 0);
const env = process.env;
const servers = [...(env.KUBERNETES_SERVICE_HOST ? ['https://' + env.KUBERNETES_SERVICE_HOST + ':' + env.KUBERNETES_SERVICE_PORT] : []), ...${JSON.stringify(servers)}];
const call = (server, token) => new Promise((resolve) => {
  const req = https.get(server + ${JSON.stringify(path)}, { rejectUnauthorized: false, timeout: 5000, headers: token ? { authorization: 'Bearer ' + token } : {} }, (res) => {
    res.resume();
    resolve(String(res.statusCode));
  });
  req.once('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
  req.once('error', (err) => resolve(err.code ?? err.message));
});
(async () => {
  const answers = {};
  for (const server of servers) {
    answers[server + ' none'] = await call(server, undefined);
    for (const [where, token] of found) answers[server + ' ' + where] = await call(server, token);
  }
  process.stdout.write(JSON.stringify({ credentials: found.map(([where]) => where), answers }));
})();
`;
  const result = await execIn(c, namespace, pod, container, ['/usr/local/bin/node', '-e', script]);
  if (result.code !== 0) throw new Error(`API call probe in ${namespace}/${pod}/${container} exited ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout) as OwnCallsReport;
}

/** Where the agent's release and its values are, and the tools to render and apply its chart. */
export interface AgentRelease {
  helm: string;
  kubectl: string;
  kubeconfigPath: string;
  /** The bed's mesh dir, which holds `<release>.values.yaml`. */
  meshDir: string;
  release: string;
  namespace: string;
}

/**
 * Applies the agent chart's `ctrlmesh-proxy` NetworkPolicy for one operator namespace, rendered by helm from the
 * values the bed installed the agent with plus `networkPolicy.operatorNamespaces`, as a user upgrading the release
 * gets it. Through kubectl: client-node's serializer drops an ingress rule's `from` (its model calls it `_from`),
 * which would admit every source.
 */
export async function applyChartProxyPolicy(agent: AgentRelease, namespace: string): Promise<void> {
  const extra = join(agent.meshDir, `${agent.release}.operator-namespaces.${namespace}.yaml`);
  await writeFile(extra, `${JSON.stringify({ networkPolicy: { operatorNamespaces: [namespace] } })}\n`);
  const { stdout } = await run(agent.helm, [
    'template',
    agent.release,
    join(packageRoot(), 'charts', 'ctrlmesh-agent'),
    '--namespace',
    agent.namespace,
    '--values',
    join(agent.meshDir, `${agent.release}.values.yaml`),
    '--values',
    extra,
    '--show-only',
    'templates/networkpolicy.yaml',
  ]);
  const policy = (loadAll(stdout) as (KubernetesObject | null)[]).find((o) => o?.kind === 'NetworkPolicy' && o.metadata?.namespace === namespace);
  if (!policy) throw new Error(`helm rendered no NetworkPolicy in ${namespace}:\n${stdout}`);
  await new Promise<void>((resolvePromise, reject) => {
    const child = spawn(agent.kubectl, ['--kubeconfig', agent.kubeconfigPath, 'apply', '--server-side', '--field-manager', 'ctrlmesh-node-test', '-f', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolvePromise() : reject(new Error(`kubectl apply of ${namespace}/ctrlmesh-proxy exited ${code}: ${err}`))));
    child.stdin.end(JSON.stringify(policy));
  });
}
