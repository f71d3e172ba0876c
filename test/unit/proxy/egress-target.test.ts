import { describe, expect, it } from 'vitest';
import { connectTarget, requestTarget } from '../../../src/proxy/egress/egress-target.js';

describe('requestTarget: one form for every way of writing a URL', () => {
  it.each([
    ['http://127.1:8080/a', 'http://127.0.0.1:8080/a'],
    ['http://2130706433/a', 'http://127.0.0.1/a'],
    ['http://[::ffff:127.0.0.1]/a', 'http://127.0.0.1/a'],
    ['http://[::FFFF:7f00:1]:81/a', 'http://127.0.0.1:81/a'],
    ['http://Example.COM./%61dmin?%6Bey=%2F', 'http://example.com/admin?key=%2F'],
    ['http://example.com/a/../b/./c', 'http://example.com/b/c'],
    ['http://example.com/%7e%2d%2e%5f%2f%3a', 'http://example.com/~-._%2F%3A'],
    ['http://%65xample.com/x#frag', 'http://example.com/x'],
    ['http://[::1]:8080/x', 'http://[::1]:8080/x'],
  ])('%s is %s', (written, canonical) => {
    const target = requestTarget(written);
    expect('url' in target && target.url.href).toBe(canonical);
  });

  it('names the host and port the call goes to', () => {
    expect(requestTarget('http://[::1]:8080/x')).toMatchObject({ host: '::1', port: 8080 });
    expect(requestTarget('http://EXAMPLE.com/x')).toMatchObject({ host: 'example.com', port: 80 });
  });

  it.each(['/relative', 'https://example.com/', 'file:///etc/passwd', 'ftp://x/', 'http://', 'not a url', 'http://127.0.0.2../', 'http://localhost../', 'http://a..b/', 'http://.a/'])('refuses %s', (written) => {
    expect(requestTarget(written)).toHaveProperty('refused');
  });
});

describe('connectTarget: host:port, canonical', () => {
  it.each([
    ['LocalHost:443', { host: 'localhost', port: 443 }],
    ['127.1:8443', { host: '127.0.0.1', port: 8443 }],
    ['[::1]:443', { host: '::1', port: 443 }],
    ['[::ffff:10.0.0.1]:443', { host: '10.0.0.1', port: 443 }],
    ['example.com.:1', { host: 'example.com', port: 1 }],
  ])('%s', (written, target) => {
    expect(connectTarget(written)).toEqual(target);
  });

  it.each(['127.0.0.1:abc', '127.0.0.1:70000', '127.0.0.1:0', '127.0.0.1', 'a:80/x', 'user@a:80', '[::1:443', 'a b:80', ':443', '[zz]:443', 'localhost..:443', '127.0.0.2..:80', 'a..b:80'])('refuses %s', (written) => {
    expect(connectTarget(written)).toHaveProperty('refused');
  });
});
