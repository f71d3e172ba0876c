import { unwatchFile, watchFile } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { FileError } from '../../errors.js';
import type { PodLabels, PodLabelsSource } from '../rules/index.js';
import { parsePodLabels } from './pod-labels.js';

/** The labels of the file, or a FileError naming it and every line at fault. */
export async function readPodLabels(path: string): Promise<PodLabels> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new FileError(path, `cannot read the pod's labels (${(err as Error).message})`, { cause: err });
  }
  const parsed = parsePodLabels(text);
  if (!parsed.ok) throw new FileError(path, `is not a downward API labels file: ${parsed.problems.join('; ')}`);
  return parsed.labels;
}

/**
 * The pod's labels from its downward API file (`--pod-labels`), polled like the `--rules` files: the kubelet
 * rewrites the file when the pod's labels change. A file that cannot be used at start is an error; a change that
 * cannot be used is logged and the current labels stay.
 */
export class PodLabelsFile implements PodLabelsSource {
  readonly description: string;
  private readonly path: string;
  private readonly logger: Logger;
  private readonly intervalMs: number;
  private listener: (() => void) | undefined;

  constructor(options: { path: string; logger: Logger; pollIntervalMs?: number }) {
    this.path = options.path;
    this.description = `the pod labels of ${options.path}`;
    this.logger = options.logger;
    this.intervalMs = options.pollIntervalMs ?? 500;
  }

  async start(onLabels: (labels: PodLabels) => void): Promise<void> {
    onLabels(await readPodLabels(this.path));
    const path = this.path;
    this.listener = () => {
      readPodLabels(path).then(
        (labels) => {
          onLabels(labels);
          this.logger.info({ path, labels }, 'pod labels reloaded');
        },
        (err: unknown) => this.logger.error({ err }, 'pod labels changed but cannot be used; keeping the current ones'),
      );
    };
    watchFile(path, { interval: this.intervalMs }, this.listener);
  }

  async stop(): Promise<void> {
    const listener = this.listener;
    this.listener = undefined;
    if (listener) unwatchFile(this.path, listener);
  }
}
