import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ToolError } from '../../errors.js';
import { packageRoot } from '../package-root.js';
import { TOOL_SPECS } from '../tool-specs.js';

/**
 * Where local images live. `localhost` is the conventional domain of images that come from no registry: nothing
 * is ever pulled from it, the images are imported into containerd and run with `imagePullPolicy: Never`.
 */
export const LOCAL_IMAGE_PREFIX = 'localhost/ctrlmesh';

/** The tag of the sandbox image; containerd's CRI config names it (`sandbox_image`). */
export const PAUSE_TAG = '3.10';

export const PROJECT_IMAGE_NAMES = ['controllermesh', 'nats-server', 'sample-controller', 'conformance-operator', 'pause'] as const;
export type ProjectImageName = (typeof PROJECT_IMAGE_NAMES)[number];

/** An image name split the way the charts take it (`image.repository`, `image.tag`). */
export interface ImageRef {
  repository: string;
  tag: string;
  /** `repository:tag`. */
  ref: string;
}

export function localImageRef(name: string, tag: string): ImageRef {
  const repository = `${LOCAL_IMAGE_PREFIX}/${name}`;
  return { repository, tag, ref: `${repository}:${tag}` };
}

/** Splits `domain/path:tag` at the tag's colon (a domain may carry a port, so the last colon after the last slash). */
export function parseImageRef(ref: string): ImageRef {
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  if (colon <= slash || colon === ref.length - 1 || ref.includes('@')) {
    throw new ToolError(`image name ${ref} needs a tag (name:tag, no digest)`);
  }
  return { repository: ref.slice(0, colon), tag: ref.slice(colon + 1), ref };
}

/** The version in ControllerMesh's package.json: the controllermesh image's tag, like the charts' appVersion. */
export function projectVersion(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: unknown };
  if (typeof pkg.version !== 'string') throw new ToolError('package.json has no version');
  return pkg.version;
}

/** The name and tag of each image the real-node test bed runs, known without building anything (for chart values). */
export function imageRefs(): Record<ProjectImageName, ImageRef> {
  return {
    controllermesh: localImageRef('controllermesh', projectVersion()),
    'nats-server': localImageRef('nats-server', TOOL_SPECS['nats-server'].version),
    'sample-controller': localImageRef('sample-controller', TOOL_SPECS['sample-controller'].version),
    'conformance-operator': localImageRef('conformance-operator', TOOL_SPECS['conformance-operator'].version),
    pause: localImageRef('pause', PAUSE_TAG),
  };
}
