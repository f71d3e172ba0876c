import Fastify from 'fastify';
import { CustomObjectsApi, setHeaderOptions, PatchStrategy, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { API_GROUP, API_VERSION, validateManifest, type ShardingConfigModel, type ShardingConfigStatus } from '../api/index.js';
import { clusterEndpoint, isApiStatus } from '../kube/index.js';
import { createAgentMetrics, createRegistry, registerOpsRoutes, type AgentMetrics } from '../metrics/index.js';
import { createHashSettings, type HashSettings } from '../sharding/index.js';
import {
  MESSAGE_SCHEMA_VERSION,
  Messages,
  Subjects,
  publishMessage,
  sameReport,
  watchRouteTables,
  watchStoredAcks,
  type Ack,
  type ClusterReport,
  type NatsLink,
  type RouteTable,
  type Watch,
} from '../transport/index.js';
import { CoalescingRunner } from '../runtime/index.js';
import { ClusterWatch } from './cluster-watch.js';
import { installCrds } from './crds.js';
import { Labeller, labelWork } from './labeller.js';
import { connectAndRegister, type RegisteredLink } from './register.js';
import { labelScope, NOTHING_LABELLED, labelsResource, relatedResources, type LabelScope } from './related.js';
import { buildReport } from './report.js';
import { ruleStatus, type RuleStatus } from './rule-status.js';
import { kubeGetter, ShardSelectorProbe } from './shard-selector-probe.js';
import { ShardingConfigValidator, type ValidatedConfig } from './sharding-configs.js';
import { shardingConfigStatus, statusChanged } from './sharding-status.js';
import { registerWebhook, retireWebhook, startWebhookServer, WEBHOOK_PATH, type WebhookTarget, type WebhookTls } from './webhook.js';
import { mintWebhookTls } from './webhook-tls.js';
import type { AgentOptions } from './options.js';


export interface AgentHandle {
  /** Base URL of /healthz, /readyz, /metrics. */
  url: string;
  /** The labelling webhook's URL, when the API server calls it by URL (not through a Service). */
  webhookUrl?: string;
  stop(): Promise<void>;
}

/** What the agent is given besides its options: its cluster's admin credentials, loaded, and where it logs and counts. */
export interface AgentDependencies {
  kc: KubeConfig;
  logger: Logger;
  registry?: Registry;
}

/** Starts the agent of one cluster: registers it, reports it, labels it, serves its webhook and writes statuses. */
export async function startAgent(options: AgentOptions, deps: AgentDependencies): Promise<AgentHandle> {
  const { kc } = deps;
  const logger = deps.logger.child({ component: 'agent', cluster: options.cluster });
  const registry = deps.registry ?? createRegistry('agent');
  const metrics = createAgentMetrics(registry);
  const settings = createHashSettings(options.hash);
  const validator = new ShardingConfigValidator(settings.bucketCount);
  const abort = new AbortController();
  const endpoint = clusterEndpoint(kc);
  const identity = { name: options.cluster, labels: options.clusterLabels, server: options.advertisedServer ?? endpoint.server, caPem: endpoint.caPem };
  const registered = await connectAndRegister({ nats: options.nats, identity, token: options.token, logger, signal: abort.signal });
  const { link } = registered;
  metrics.natsConnected.set(1);
  if (options.installCrds) await installCrds(kc);

  let webhookTarget: WebhookTarget | undefined;
  let webhookServer: Awaited<ReturnType<typeof startWebhookServer>> | undefined;
  let webhookTls: WebhookTls | undefined;
  if (options.webhook) {
    webhookTls = options.webhook.tls ?? (await mintWebhookTls(options.webhook.host));
    webhookServer = await startWebhookServer({
      tls: webhookTls,
      host: options.webhook.host,
      port: options.webhook.port,
      settings,
      skip: new Set(options.skipNamespaces),
      logger,
      metrics,
      ...(options.sidecar
        ? {
            injector: {
              kc,
              proxy: { ...options.sidecar, nats: [...options.nats.servers], natsTls: options.nats.tls !== undefined, cluster: options.cluster, settings },
              logger,
              validator,
            },
          }
        : {}),
    });
    webhookTarget = options.webhook.target ?? { url: `https://${options.webhook.host}:${webhookServer.port}${WEBHOOK_PATH}` };
  }

  const webhook = webhookTarget && webhookTls ? { target: webhookTarget, caPem: webhookTls.caPem, inject: options.sidecar !== undefined } : undefined;
  const loop = new AgentLoop({ options, kc, settings, validator, link, registered, logger, metrics, signal: abort.signal, webhook });
  await loop.start();

  // A scrape or probe answered during stop would otherwise hold the port until its keep-alive timeout (72 s).
  const ops = Fastify({ logger: false, forceCloseConnections: true });
  registerOpsRoutes(ops, { registry, readiness: () => loop.readiness() });
  const url = await ops.listen({ host: options.listen.host, port: options.listen.port });
  const webhookUrl = webhookTarget && 'url' in webhookTarget ? webhookTarget.url : undefined;
  logger.info({ url, webhook: webhookTarget }, 'agent running');
  return {
    url,
    ...(webhookUrl ? { webhookUrl } : {}),
    async stop() {
      abort.abort();
      // After the loop, so no sync can register the webhook again; a failure must not keep the agent from exiting.
      await loop.stop();
      if (webhook) {
        const injection = webhook.inject ? { injection: { target: webhook.target, caPem: webhook.caPem } } : {};
        await retireWebhook({ kc, cluster: options.cluster, ...injection }).catch((err: unknown) =>
          logger.warn({ err: (err as Error).message }, 'could not retire the MutatingWebhookConfiguration; it stays as it was'),
        );
      }
      await ops.close();
      await webhookServer?.app.close();
      await link.close();
    },
  };
}

/** Where the loop's webhook is registered, when the agent serves one. */
interface LoopWebhook {
  target: WebhookTarget;
  caPem: string;
  /** Whether the sidecar injection webhook is registered too. */
  inject: boolean;
}

interface LoopContext {
  options: AgentOptions;
  kc: KubeConfig;
  settings: HashSettings;
  validator: ShardingConfigValidator;
  link: NatsLink;
  registered: RegisteredLink;
  logger: Logger;
  metrics: AgentMetrics;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
  webhook: LoopWebhook | undefined;
}

/** The agent's steady state: informers in, reports, heartbeats, labels, webhook rules and statuses out. */
class AgentLoop {
  private readonly watch: ClusterWatch;
  private readonly labeller: Labeller;
  /** Whether the API server filters by shard selector: decides what is labelled and what the report says. */
  private readonly probe: ShardSelectorProbe;
  private readonly custom: CustomObjectsApi;
  private readonly routes = new Map<string, RouteTable>();
  private routesWatch: Watch | undefined;
  /** The hub's stored acknowledgements, by state key: which proxies have which cluster rules in force. */
  private readonly acks = new Map<string, Ack>();
  private acksWatch: Watch | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private repeat: NodeJS.Timeout | undefined;
  private lastReport: ClusterReport | undefined;
  /**
   * The resourceVersions the agent's own status writes produced: the watch event of each changes nothing a sync
   * reads (spec and labels are as they were), so it must not earn a sync, which would hold the next real change
   * back for the debounce.
   */
  private readonly ownWrites = new Set<string>();
  private readonly syncer: CoalescingRunner;
  private relatedKey = '';
  /** Whether the webhook (when served) is registered for a scope the probe decided: what labels at admission. */
  private webhookLive = false;
  private unlisten: (() => void) | undefined;
  private readonly options: AgentOptions;
  private readonly kc: KubeConfig;
  private readonly settings: HashSettings;
  private readonly validator: ShardingConfigValidator;
  private readonly link: NatsLink;
  private readonly registered: RegisteredLink;
  private readonly logger: Logger;
  private readonly metrics: AgentMetrics;
  private readonly signal: AbortSignal;
  private readonly webhook: LoopWebhook | undefined;

  constructor(context: LoopContext) {
    ({
      options: this.options,
      kc: this.kc,
      settings: this.settings,
      validator: this.validator,
      link: this.link,
      registered: this.registered,
      logger: this.logger,
      metrics: this.metrics,
      signal: this.signal,
      webhook: this.webhook,
    } = context);
    this.syncer = new CoalescingRunner({ intervalMs: this.options.debounceMs, task: () => this.sync() });
    const { kc } = this;
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.labeller = new Labeller({ kc, logger: this.logger, metrics: this.metrics, qps: this.options.labelQps });
    // Polled on the report's repeat: an upgrade is rare, and the report that says so goes out on that rhythm anyway.
    this.probe = new ShardSelectorProbe({
      get: kubeGetter(kc),
      logger: this.logger,
      metrics: this.metrics,
      intervalMs: this.options.reportRepeatMs,
      onChange: () => this.schedule(),
    });
    this.watch = new ClusterWatch({
      kc,
      logger: this.logger,
      onChange: (updated) => {
        const version = updated?.metadata?.resourceVersion;
        if (version !== undefined && this.ownWrites.delete(version)) return;
        this.schedule();
      },
      onSyncChange: () => {
        this.metrics.apiServerSynced.set(this.watch.synced() ? 1 : 0);
        this.sendHeartbeat();
        this.schedule();
      },
    });
  }

  async start(): Promise<void> {
    const { link, logger } = this;
    this.unlisten = link.onEvent((event) => {
      this.metrics.natsConnected.set(event.state === 'connected' ? 1 : 0);
      if (!event.reconnected) return;
      // The hub may have lost its KV (or been replaced): register again (idempotent) and resend everything.
      void this.registered
        .reregister(this.signal)
        .then(() => {
          this.lastReport = undefined;
          this.schedule();
        })
        .catch((err: unknown) => logger.error({ err }, 'registration after reconnecting failed'));
    });
    this.routesWatch = watchRouteTables({
      link,
      cluster: this.options.cluster,
      logger,
      onTable: (table) => {
        this.routes.set(`${table.operator}\u0000${table.shard}`, table);
        this.schedule();
      },
    });
    this.acksWatch = watchStoredAcks({
      link,
      cluster: this.options.cluster,
      logger,
      onAck: (key, ack) => {
        if (ack) this.acks.set(key, ack);
        else this.acks.delete(key);
        this.schedule();
      },
    });
    this.heartbeat = setInterval(() => this.sendHeartbeat(), this.options.heartbeatMs);
    this.repeat = setInterval(() => this.repeatReport(), this.options.reportRepeatMs);
    this.probe.start();
    this.sendHeartbeat();
  }

  readiness(): { ready: boolean; reasons: string[] } {
    const reasons: string[] = [];
    if (this.link.state() !== 'connected') reasons.push(`NATS ${this.link.state()}`);
    if (!this.watch.synced()) reasons.push('informers not in sync with the API server');
    // Ready means labelling: a Service sends the API server's admission calls only to ready pods.
    if (!this.probe.answered) reasons.push('shard selector probe not answered yet (nothing labelled)');
    else if (this.webhook && !this.webhookLive) reasons.push('admission webhook not registered yet');
    return { ready: reasons.length === 0, reasons };
  }

  async stop(): Promise<void> {
    clearInterval(this.heartbeat);
    clearInterval(this.repeat);
    this.unlisten?.();
    this.routesWatch?.stop();
    this.acksWatch?.stop();
    await this.probe.stop();
    await this.syncer.stop();
    await this.watch.stop();
  }

  private sendHeartbeat(): void {
    if (this.link.state() !== 'connected') return;
    publishMessage(this.link, Subjects.heartbeat(this.options.cluster), Messages.heartbeat, {
      schema: MESSAGE_SCHEMA_VERSION,
      cluster: this.options.cluster,
      sentAt: new Date().toISOString(),
      apiServerReachable: this.watch.synced(),
    }, this.registered.proofKey);
  }

  private schedule(): void {
    if (!this.signal.aborted) this.syncer.schedule();
  }

  /** One pass over the informers' caches: report, related resources, statuses, labels. */
  private async sync(): Promise<void> {
    try {
      const configs = this.validConfigs();
      // Nothing is labelled (by a pass or the webhook) before the probe answers; its first answer schedules a sync.
      const answered = this.probe.answered;
      const scope = answered ? labelScope({ configs, algorithm: this.settings.algorithm, serverShardSelectors: this.probe.offered }) : NOTHING_LABELLED;
      await this.updateRelated(configs, scope);
      if (answered) this.webhookLive = true;
      this.sendReport();
      await this.writeStatuses();
      await this.writeRuleStatuses();
      this.label(scope);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'sync failed; retrying on the next change');
    }
  }

  /** The informer's ShardingConfigs, each version validated once. */
  private shardingConfigs(): ValidatedConfig[] {
    return this.validator.validateAll(this.watch.shardingConfigs.list());
  }

  private validConfigs(): ShardingConfigModel[] {
    return this.shardingConfigs().flatMap(({ model }) => (model ? [model] : []));
  }

  /**
   * Watches every related resource (the report counts their objects whatever labels them) and registers the
   * webhook for what `scope` labels, of those the API server serves.
   */
  private async updateRelated(configs: readonly ShardingConfigModel[], scope: LabelScope): Promise<void> {
    const wanted = relatedResources(configs);
    const key = JSON.stringify({ wanted, scope });
    if (key === this.relatedKey) return;
    const missing = await this.watch.setRelated(wanted);
    if (missing.length) this.logger.warn({ missing }, 'ShardingConfigs relate to resources this API server does not serve');
    if (this.webhook) {
      await registerWebhook({
        kc: this.kc,
        cluster: this.options.cluster,
        target: this.webhook.target,
        caPem: this.webhook.caPem,
        inject: this.webhook.inject,
        skip: this.options.skipNamespaces,
        namespaces: scope.namespaces,
        resources: [...this.watch.related.values()]
          .filter((r) => labelsResource(scope, r.resource))
          .map((r) => ({ group: r.resource.group, resource: r.resource.resource })),
      });
    }
    this.relatedKey = key;
  }

  private sendReport(): void {
    // A report from half-listed informers would tell the hub that configs vanished: send only complete views.
    if (this.link.state() !== 'connected' || !this.watch.synced()) return;
    const related = new Map(
      [...this.watch.related.values()].map((r) => [r.resource.group ? `${r.resource.resource}.${r.resource.group}` : r.resource.resource, r.watch.list()]),
    );
    const built = buildReport({
      cluster: this.options.cluster,
      settings: this.settings,
      shardingConfigs: this.shardingConfigs(),
      circuitBreakers: this.watch.circuitBreakers.list(),
      faultInjections: this.watch.faultInjections.list(),
      pods: this.watch.pods.list(),
      namespaces: this.watch.namespaces.list(),
      related,
      shardSelectors: this.probe.offered,
      now: new Date(),
    });
    // The hub stores only reports that say something new; the repeat timer resends the last one anyway.
    if (this.lastReport && sameReport(this.lastReport, built)) return;
    this.lastReport = built;
    this.publishReport(built);
  }

  private repeatReport(): void {
    if (this.lastReport && this.link.state() === 'connected') this.publishReport(this.lastReport);
  }

  private publishReport(report: ClusterReport): void {
    // Signed: the hub counts the cluster's reports only from the key its token was bound to, not a copy of its identity.
    publishMessage(this.link, Subjects.report(this.options.cluster), Messages.clusterReport, report, this.registered.proofKey);
    this.metrics.reportsSent.inc();
  }

  private async writeStatuses(): Promise<void> {
    for (const { object: obj, validation } of this.shardingConfigs()) {
      const namespace = obj.metadata?.namespace ?? '';
      const name = obj.metadata?.name ?? '';
      const operator = `${namespace}/${name}`;
      const previous = (obj as KubernetesObject & { status?: ShardingConfigStatus }).status;
      const next = shardingConfigStatus({
        generation: obj.metadata?.generation ?? 0,
        validation,
        routes: [...this.routes.values()].filter((t) => t.operator === operator),
        previous,
        now: new Date(),
      });
      if (!statusChanged(previous, next)) continue;
      try {
        this.wrote(
          await this.custom.patchNamespacedCustomObjectStatus(
            { group: API_GROUP, version: 'v1alpha1', namespace, plural: 'shardingconfigs', name, body: { status: next } },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          ),
        );
      } catch (err) {
        if (!isApiStatus(err, 404)) this.logger.warn({ err: (err as Error).message, operator }, 'could not write ShardingConfig status');
      }
    }
  }

  /**
   * The status of every CircuitBreaker and FaultInjection of this cluster: validation, and the proxies that have it
   * in force, from the acknowledgements of the shards whose home is this cluster (a rule reaches those alone).
   */
  private async writeRuleStatuses(): Promise<void> {
    const acks = [...this.acks.values()].filter((ack) => this.routes.get(`${ack.operator}\u0000${ack.shard}`)?.homeCluster === this.options.cluster);
    const kinds = [
      { kind: 'CircuitBreaker', plural: 'circuitbreakers', objects: this.watch.circuitBreakers.list() },
      { kind: 'FaultInjection', plural: 'faultinjections', objects: this.watch.faultInjections.list() },
    ] as const;
    for (const { kind, plural, objects } of kinds) {
      for (const obj of objects) {
        const namespace = obj.metadata?.namespace ?? '';
        const name = obj.metadata?.name ?? '';
        const generation = obj.metadata?.generation ?? 0;
        const status = (obj as KubernetesObject & { status?: Partial<RuleStatus> }).status;
        // Only the fields the agent writes: a KusionStack status may hold others, which the merge patch keeps.
        const previous = status && { observedGeneration: status.observedGeneration, conditions: status.conditions, proxies: status.proxies };
        const validation = validateManifest({ apiVersion: API_VERSION, kind, metadata: { name, namespace }, spec: (obj as { spec?: unknown }).spec });
        const next = ruleStatus({ kind, namespace, name, generation, validation, acks, previous, now: new Date() });
        if (!statusChanged(previous, next)) continue;
        try {
          this.wrote(
            await this.custom.patchNamespacedCustomObjectStatus(
              { group: API_GROUP, version: 'v1alpha1', namespace, plural, name, body: { status: next } },
              setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
            ),
          );
        } catch (err) {
          if (!isApiStatus(err, 404)) this.logger.warn({ err: (err as Error).message, kind, rule: `${namespace}/${name}` }, 'could not write the rule status');
        }
      }
    }
  }

  /** Remembers the resourceVersion a status write produced (bounded: an echo the watch never delivers is dropped). */
  private wrote(result: unknown): void {
    const version = (result as KubernetesObject | undefined)?.metadata?.resourceVersion;
    if (version === undefined) return;
    if (this.ownWrites.size >= 1_000) this.ownWrites.clear();
    this.ownWrites.add(version);
  }

  private label(scope: LabelScope): void {
    const work = labelWork({
      namespaces: this.watch.namespaces.list(),
      related: [...this.watch.related.values()].map(({ resource, watch }) => ({ ...resource, objects: watch.list() })),
      settings: this.settings,
      skip: new Set(this.options.skipNamespaces),
      scope,
    });
    // Runs in the background; a change arriving meanwhile triggers the next pass, which skips what is done.
    void this.labeller.run(work, this.signal).then((ran) => {
      if (ran) this.schedule();
    });
  }
}
