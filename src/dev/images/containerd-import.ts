import { stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { ToolError } from '../../errors.js';
import { parseImageRef } from './refs.js';
import { runCommand } from './run.js';

/** The namespace the kubelet's images live in (containerd's CRI plugin uses only this one). */
export const CRI_NAMESPACE = 'k8s.io';
/** The label the CRI plugin puts on images it manages (containerd 1.6, pkg/cri/server/helpers.go). */
export const CRI_MANAGED_LABEL = 'io.cri-containerd.image';
const CRI_MANAGED_VALUE = 'managed';
const POLL_MS = 200;

export interface ImportOptions {
  /** containerd's socket, e.g. /run/containerd/containerd.sock. */
  address: string;
  /** Archives from buildProjectImages; a digest, when given, is checked against what containerd recorded. */
  archives: ReadonlyArray<{ ref: string; archive: string; digest?: string }>;
  namespace?: string;
  /** The CRI plugin's snapshotter (`plugins."io.containerd.grpc.v1.cri".containerd.snapshotter`). */
  snapshotter?: string;
  /** How long to wait for the CRI plugin to register each image before labelling it ourselves. */
  criWaitMs?: number;
  /** The ctr binary; `ctr` on PATH by default. */
  ctr?: string;
  onProgress?: (message: string) => void;
  signal?: AbortSignal;
}

export interface ImportedImage {
  ref: string;
  /** The manifest digest containerd holds for the name. */
  digest: string;
  /** `cri` when the CRI plugin registered the image itself, `label` when we had to mark it managed. */
  registeredBy: 'cri' | 'label';
}

/**
 * Imports OCI archives into containerd and unpacks them for the CRI plugin's snapshotter, so pods run them with
 * `imagePullPolicy: Never` (and the pause image serves as `sandbox_image`) without any registry.
 *
 * What containerd 1.6 does with an imported image: `ctr images import` stores the content under the image's name
 * and, unless `--no-unpack`, unpacks the layers into the given snapshotter (a snapshot the CRI plugin would
 * otherwise create on first use). The CRI plugin watches image events and, for an image it did not pull, adds the
 * `io.cri-containerd.image=managed` label and an image-ID reference itself; we wait for that label and set it
 * only if the plugin stays silent. Re-importing a rebuilt image moves the name; the old image's ID reference is
 * removed so its content can be collected. Images are garbage-collection roots: their content and unpacked snapshots stay
 * until the image is deleted. The kubelet's image garbage collection could still delete them under disk pressure
 * (containerd 1.6 does not report pinned images), and a deleted image cannot be pulled back from `localhost`.
 */
export async function importImages(options: ImportOptions): Promise<ImportedImage[]> {
  const namespace = options.namespace ?? CRI_NAMESPACE;
  const snapshotter = options.snapshotter ?? 'overlayfs';
  const onProgress = options.onProgress ?? (() => undefined);
  const ctr = (args: string[], label: string): ReturnType<typeof runCommand> =>
    runCommand(options.ctr ?? 'ctr', ['--address', options.address, '--namespace', namespace, ...args], { label, signal: options.signal });

  const imported: ImportedImage[] = [];
  for (const { ref, archive, digest: expected } of options.archives) {
    const { repository } = parseImageRef(ref);
    const label = `importing ${ref} into containerd at ${options.address}`;
    const size = (await stat(archive).catch(() => undefined))?.size;
    if (size === undefined) throw new ToolError(`${label}: no archive at ${archive}`);
    const started = Date.now();
    const previous = await findImage(ctr, ref, label);
    // The same image, already unpacked: importing again would only re-read the archive.
    if (expected && previous?.digest === expected && previous.labels[CRI_MANAGED_LABEL] === CRI_MANAGED_VALUE && (await isUnpacked(ctr, ref, snapshotter, label))) {
      onProgress(`${ref} is already in containerd (${namespace}, ${expected.slice(0, 19)}), unpacked for ${snapshotter}`);
      imported.push({ ref, digest: expected, registeredBy: 'cri' });
      continue;
    }
    // --base-name keeps only names under the image's repository: the archive cannot name anything else.
    await ctr(['images', 'import', '--base-name', repository, '--snapshotter', snapshotter, archive], label);
    const listed = await findImage(ctr, ref, label);
    if (!listed) throw new ToolError(`${label}: ctr images import finished but containerd has no image ${ref} (was the archive built for another name?)`);
    if (expected && listed.digest !== expected) {
      throw new ToolError(`${label}: containerd holds ${ref} at ${listed.digest}, the archive's manifest is ${expected}`);
    }
    let registeredBy: ImportedImage['registeredBy'] = 'cri';
    if (!(await waitForCriLabel(ctr, ref, label, options.criWaitMs ?? 10_000))) {
      await ctr(['images', 'label', ref, `${CRI_MANAGED_LABEL}=${CRI_MANAGED_VALUE}`], label);
      registeredBy = 'label';
    }
    if (previous && previous.digest !== listed.digest) {
      const removed = await removeReplaced(ctr, previous.digest, label);
      if (removed.length > 0) onProgress(`${ref}: removed the image it replaced (${removed.join(', ')}), so rebuilds do not pile up`);
    }
    onProgress(
      `imported ${ref} (${(size / 1024 / 1024).toFixed(1)} MB archive) into ${namespace}, unpacked for ${snapshotter}, in ` +
        `${((Date.now() - started) / 1000).toFixed(1)} s; ${registeredBy === 'cri' ? 'the CRI plugin registered it' : 'labelled it CRI-managed (the CRI plugin did not within the wait)'}`,
    );
    imported.push({ ref, digest: listed.digest, registeredBy });
  }
  return imported;
}

interface ListedImage {
  ref: string;
  digest: string;
  labels: Record<string, string>;
}

type Ctr = (args: string[], label: string) => ReturnType<typeof runCommand>;

async function findImage(ctr: Ctr, ref: string, label: string): Promise<ListedImage | undefined> {
  const { stdout } = await ctr(['images', 'ls', `name==${ref}`], label);
  return parseImageList(stdout).find((image) => image.ref === ref);
}

/**
 * The CRI plugin names every image it registers also by its ID (`sha256:<config digest>`); when a rebuilt image
 * takes over the name, that ID reference would keep the old content and snapshots forever. It goes, unless another
 * name still points at the old image.
 */
async function removeReplaced(ctr: Ctr, oldDigest: string, label: string): Promise<string[]> {
  const holders = parseImageList((await ctr(['images', 'ls'], label)).stdout).filter((image) => image.digest === oldDigest);
  if (holders.some((image) => !image.ref.startsWith('sha256:'))) return [];
  const refs = holders.map((image) => image.ref);
  if (refs.length > 0) await ctr(['images', 'rm', ...refs], label);
  return refs;
}

/** `ctr images check` ends each line with UNPACKED: true once the layers are unpacked for the snapshotter. */
async function isUnpacked(ctr: Ctr, ref: string, snapshotter: string, label: string): Promise<boolean> {
  const { stdout } = await ctr(['images', 'check', '--snapshotter', snapshotter, `name==${ref}`], label);
  const line = stdout.split('\n').find((l) => l.trim().split(/\s+/)[0] === ref);
  return line?.trim().split(/\s+/).at(-1) === 'true';
}

async function waitForCriLabel(ctr: Ctr, ref: string, label: string, waitMs: number): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const image = await findImage(ctr, ref, label);
    if (image?.labels[CRI_MANAGED_LABEL] === CRI_MANAGED_VALUE) return true;
    if (Date.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
}

/**
 * Parses `ctr images ls`: columns REF TYPE DIGEST SIZE PLATFORMS LABELS, where SIZE holds a space ("1.2 MiB"), so
 * the reference, type and digest are read from the left and the labels (`-` or `k=v,k=v`) from the right.
 */
export function parseImageList(output: string): ListedImage[] {
  const images: ListedImage[] = [];
  for (const line of output.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    const [ref, , digest] = fields;
    const labelField = fields.at(-1);
    if (!ref || !digest?.startsWith('sha256:') || labelField === undefined) continue;
    const labels: Record<string, string> = {};
    if (labelField !== '-') {
      for (const pair of labelField.split(',')) {
        const eq = pair.indexOf('=');
        if (eq > 0) labels[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
    }
    images.push({ ref, digest, labels });
  }
  return images;
}
