// Local OCI images for the real-node test bed: built without Docker or a registry, imported into containerd.
export { CRI_MANAGED_LABEL, CRI_NAMESPACE, importImages, parseImageList, type ImportedImage, type ImportOptions } from './containerd-import.js';
export {
  CONTAINERD_NAME_ANNOTATION,
  MEDIA_TYPES,
  OCI_REF_NAME_ANNOTATION,
  writeOciArchive,
  type Descriptor,
  type ImageRunConfig,
  type OciArchiveOptions,
  type OciArchiveResult,
} from './oci-archive.js';
export { buildProjectImage, buildProjectImages, imageCacheDir, type BuiltImage, type ImageBuildOptions } from './project-images.js';
export {
  imageRefs,
  LOCAL_IMAGE_PREFIX,
  localImageRef,
  PAUSE_TAG,
  parseImageRef,
  PROJECT_IMAGE_NAMES,
  type ImageRef,
  type ProjectImageName,
} from './refs.js';
export { assembleRootfs, IMAGE_USER, parseLddOutput, sharedLibraries, type RootfsEntry, type RootfsOptions, type RootfsResult } from './rootfs.js';
