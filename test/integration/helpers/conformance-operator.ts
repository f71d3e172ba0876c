import { spawn, type ChildProcess } from 'node:child_process';
import type { KubernetesObject } from '@kubernetes/client-node';
import { eachLine } from './e2e-shard.js';

export const WIDGETS = { group: 'conformance.ctrlmesh.dev', version: 'v1alpha1', plural: 'widgets' } as const;
export const WIDGET_FINALIZER = 'conformance.ctrlmesh.dev/cleanup';

/** The CRD the conformance operator reconciles: namespaced Widgets with a status subresource. */
export function widgetCrd(): KubernetesObject & { spec: unknown } {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${WIDGETS.plural}.${WIDGETS.group}` },
    spec: {
      group: WIDGETS.group,
      scope: 'Namespaced',
      names: { plural: WIDGETS.plural, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: [
        {
          name: WIDGETS.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                status: { type: 'object', properties: { reconciledBy: { type: 'string' }, observedGeneration: { type: 'integer' } } },
              },
            },
          },
        },
      ],
    },
  };
}

/** One JSON line of the operator's log (controller-runtime's zap, production encoding). */
interface LogLine {
  msg?: string;
  logger?: string;
  identity?: string;
  namespace?: string;
  name?: string;
  kind?: string;
  sinceStartMs?: number;
}

export interface Reconciled {
  identity: string;
  /** `namespace/name` of the Widget. */
  key: string;
  at: number;
}

export interface ObservedDelete {
  identity: string;
  kind: string;
  namespace: string;
  name: string;
  at: number;
}

/** One process of the conformance operator, with what it logged so far. */
export interface OperatorProcess {
  identity: string;
  process: ChildProcess;
  /** When it said it was elected, and when its caches synced (ms since its start). */
  electedMs?: number;
  syncedMs?: number;
  log: string[];
  stop(): Promise<void>;
}

/**
 * Starts the conformance operator with `kubeconfig`, leader election on (its default) in `leaderNamespace`, reporting
 * reconciles and the deletes its informers deliver.
 */
export function startOperator(options: {
  binary: string;
  kubeconfig: string;
  identity: string;
  leaderNamespace: string;
  reconciles: Reconciled[];
  deletes: ObservedDelete[];
  args?: string[];
}): OperatorProcess {
  const { identity } = options;
  const child = spawn(
    options.binary,
    [`--kubeconfig=${options.kubeconfig}`, `--identity=${identity}`, `--leader-election-namespace=${options.leaderNamespace}`, '--health-probe-bind-address=0', ...(options.args ?? [])],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const started: OperatorProcess = {
    identity,
    process: child,
    log: [],
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
  eachLine(child.stderr, (text) => {
    started.log.push(text);
    if (started.log.length > 400) started.log.shift();
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    if (line.msg === 'elected') started.electedMs = line.sinceStartMs;
    else if (line.msg === 'caches synced') started.syncedMs = line.sinceStartMs;
    // controller-runtime's reconcile logger carries the request's namespace and name.
    else if (line.msg === 'reconciled') options.reconciles.push({ identity, key: `${line.namespace}/${line.name}`, at: Date.now() });
    else if (line.msg === 'observed delete') {
      options.deletes.push({ identity, kind: line.kind ?? '', namespace: line.namespace ?? '', name: line.name ?? '', at: Date.now() });
    }
  });
  return started;
}
