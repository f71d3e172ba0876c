import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runCommand } from '../images/run.js';

const PROGRESS_EVERY_MS = 15_000;

export interface HelmRelease {
  name: string;
  namespace: string;
  /** A chart directory. */
  chart: string;
  values: Record<string, unknown>;
}

export interface HelmOptions {
  helm: string;
  kubeconfigPath: string;
  /** Where each release's values file is written (kept, so a user can read what was installed). */
  dir: string;
  onProgress: (message: string) => void;
  /** How long helm waits for the release's pods to be Ready (their readiness probes). */
  timeoutSeconds: number;
  signal?: AbortSignal;
}

/**
 * `helm upgrade --install --wait`: installs or upgrades a release and returns once its workloads are Ready, as a
 * user would install it. Values go through a file (JSON is YAML), never through --set, so nothing is re-parsed.
 */
export async function helmInstall(release: HelmRelease, options: HelmOptions): Promise<void> {
  const valuesFile = join(options.dir, `${release.name}.values.yaml`);
  await writeFile(valuesFile, `${JSON.stringify(release.values, null, 2)}\n`, { mode: 0o600 });
  const args = [
    'upgrade',
    '--install',
    release.name,
    release.chart,
    '--namespace',
    release.namespace,
    '--kubeconfig',
    options.kubeconfigPath,
    '--values',
    valuesFile,
    '--wait',
    '--timeout',
    `${options.timeoutSeconds}s`,
  ];
  const started = Date.now();
  options.onProgress(`helm install ${release.name} (${release.chart}) into ${release.namespace}; waiting for its pods to be Ready`);
  const timer = setInterval(() => options.onProgress(`still installing ${release.name}: ${Math.round((Date.now() - started) / 1000)} s`), PROGRESS_EVERY_MS);
  try {
    await runCommand(options.helm, args, { label: `helm install ${release.name}`, ...(options.signal ? { signal: options.signal } : {}) });
  } finally {
    clearInterval(timer);
  }
  options.onProgress(`${release.name} Ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
