import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { imageCacheDir, imageRefs, parseImageList, parseImageRef, TOOL_SPECS } from '../../../src/dev/index.js';

describe('image names and the image cache', () => {
  it('names every image under localhost/ctrlmesh with its pinned tag', () => {
    const refs = imageRefs();
    expect(refs.controllermesh).toEqual({ repository: 'localhost/ctrlmesh/controllermesh', tag: '0.1.0', ref: 'localhost/ctrlmesh/controllermesh:0.1.0' });
    expect(refs['nats-server'].ref).toBe(`localhost/ctrlmesh/nats-server:${TOOL_SPECS['nats-server'].version}`);
    expect(refs['sample-controller'].ref).toBe(`localhost/ctrlmesh/sample-controller:${TOOL_SPECS['sample-controller'].version}`);
    expect(refs.pause.ref).toBe('localhost/ctrlmesh/pause:3.10');
  });

  it('splits a reference at the tag, not at a port', () => {
    expect(parseImageRef('localhost:5000/a/b:v1')).toEqual({ repository: 'localhost:5000/a/b', tag: 'v1', ref: 'localhost:5000/a/b:v1' });
    expect(() => parseImageRef('localhost:5000/a/b')).toThrow(/needs a tag/);
  });

  it('keeps images beside the tool cache', () => {
    expect(imageCacheDir({ XDG_CACHE_HOME: '/c' })).toBe(join('/c', 'ctrlmesh', 'images'));
    expect(imageCacheDir({ XDG_CACHE_HOME: '', HOME: '/h' })).toMatch(/\/ctrlmesh\/images$/);
  });

  it('reads ctr images ls, whose size column holds a space', () => {
    const output = [
      'REF                                   TYPE                                    DIGEST                                                                  SIZE     PLATFORMS   LABELS ',
      'localhost/ctrlmesh/pause:3.10         application/vnd.oci.image.manifest.v1+json sha256:aaaa 339.1 KiB linux/amd64 io.cri-containerd.image=managed ',
      'sha256:bbbb                           application/vnd.oci.image.manifest.v1+json sha256:aaaa 339.1 KiB linux/amd64 - ',
      '',
    ].join('\n');
    expect(parseImageList(output)).toEqual([
      { ref: 'localhost/ctrlmesh/pause:3.10', digest: 'sha256:aaaa', labels: { 'io.cri-containerd.image': 'managed' } },
      { ref: 'sha256:bbbb', digest: 'sha256:aaaa', labels: {} },
    ]);
  });
});
