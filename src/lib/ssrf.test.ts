import { BlockList } from 'node:net';
import { describe, expect, it } from 'vitest';
import { SwitchboardError } from '../domain/errors.ts';
import { MAX_HOOK_URL_BYTES, checkHookTarget, parseAllowList, type OutboundPolicy } from './ssrf.ts';

/** Outbound safety for notify hooks (SPEC-0024): what checkHookTarget lets through, and what it refuses. */

const strict: OutboundPolicy = { allowHttp: false, allow: new BlockList() };

/** The refusal checkHookTarget throws, or a failure when it lets the URL through. */
async function refusal(url: string, policy: OutboundPolicy = strict): Promise<SwitchboardError> {
  const err = await checkHookTarget(url, policy).then(
    (t) => new Error(`accepted ${url} as ${t.address}`),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SwitchboardError);
  return err as SwitchboardError;
}

function allowing(cidrs: string): BlockList {
  const list = parseAllowList(cidrs);
  if (typeof list === 'string') throw new Error(list);
  return list;
}

describe('checkHookTarget: address classes', () => {
  const nonPublic: [string, string][] = [
    ['loopback', 'https://127.0.0.1/hook'],
    ['private 10/8', 'https://10.1.2.3/hook'],
    ['private 172.16/12', 'https://172.16.0.1/hook'],
    ['private 192.168/16', 'https://192.168.1.1/hook'],
    ['link-local (cloud metadata)', 'https://169.254.169.254/latest/meta-data/'],
    ['shared CGNAT 100.64/10', 'https://100.64.0.1/hook'],
    ['unspecified', 'https://0.0.0.0/hook'],
    ['IPv6 loopback', 'https://[::1]/hook'],
    ['IPv6 link-local', 'https://[fe80::1]/hook'],
    ['IPv6 unique-local', 'https://[fc00::1]/hook'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/hook'],
    ['IPv4-mapped private, hex form', 'https://[::ffff:a01:203]/hook'],
    ['multicast', 'https://224.0.0.1/hook'],
    ['IPv6 unspecified', 'https://[::]/hook'],
    ['loopback spelled as one decimal number', 'https://2130706433/hook'],
    ['loopback spelled in hex', 'https://0x7f.1/hook'],
    ['loopback with a port', 'https://127.0.0.1:8443/hook'],
  ];
  for (const [what, url] of nonPublic) {
    it(`refuses ${what} (${url}), naming url`, async () => {
      const err = await refusal(url);
      expect(err.code).toBe('invalid_argument');
      expect(err.details).toEqual({ field: 'url' });
      expect(err.message).toMatch(/^url: resolves to .*not a public address/);
    });
  }

  it('refuses a host name that resolves to loopback (localhost)', async () => {
    const err = await refusal('https://localhost/hook');
    expect(err.details).toEqual({ field: 'url' });
    expect(err.message).toMatch(/^url: resolves to (127\.0\.0\.1|::1), which is not a public address/);
  });

  it('refuses a host name that does not resolve, naming url', async () => {
    const err = await refusal('https://does-not-exist.invalid/hook');
    expect(err.details).toEqual({ field: 'url' });
    expect(err.message).toMatch(/^url: host does-not-exist\.invalid does not resolve/);
  });

  it('accepts a public address and returns exactly the address it checked (the one to dial)', async () => {
    const v4 = await checkHookTarget('https://93.184.216.34/hook?x=1', strict);
    expect(v4).toMatchObject({ address: '93.184.216.34', family: 4 });
    expect(v4.url.toString()).toBe('https://93.184.216.34/hook?x=1');
    const v6 = await checkHookTarget('https://[2606:2800:220:1:248:1893:25c8:1946]/hook', strict);
    expect(v6).toMatchObject({ address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 });
  });
});

describe('checkHookTarget: URL rules', () => {
  it('requires https unless plain http is allowed', async () => {
    const err = await refusal('http://93.184.216.34/hook');
    expect(err).toMatchObject({ code: 'invalid_argument', details: { field: 'url' } });
    expect(err.message).toBe('url: must use https');
    expect((await checkHookTarget('http://93.184.216.34/hook', { ...strict, allowHttp: true })).address).toBe('93.184.216.34');
    // Other schemes stay refused even with the flag.
    for (const url of ['ftp://93.184.216.34/x', 'file:///etc/passwd', 'gopher://93.184.216.34/']) {
      expect((await refusal(url, { ...strict, allowHttp: true })).message).toBe('url: must use https or http');
    }
  });

  it('refuses user info in the URL', async () => {
    for (const url of ['https://user:pass@93.184.216.34/hook', 'https://user@93.184.216.34/hook', 'https://:pass@93.184.216.34/hook']) {
      const err = await refusal(url);
      expect(err).toMatchObject({ code: 'invalid_argument', details: { field: 'url' } });
      expect(err.message).toMatch(/user name or password/);
    }
  });

  it(`refuses a URL over ${MAX_HOOK_URL_BYTES} bytes and accepts one at the limit`, async () => {
    const base = 'https://93.184.216.34/';
    const atLimit = base + 'a'.repeat(MAX_HOOK_URL_BYTES - base.length);
    expect((await checkHookTarget(atLimit, strict)).address).toBe('93.184.216.34');
    const err = await refusal(`${atLimit}a`);
    expect(err).toMatchObject({ code: 'invalid_argument', details: { field: 'url' } });
    expect(err.message).toMatch(/at most 2048 bytes/);
    // Bytes, not characters: 1000 two-byte characters are over the limit.
    expect((await refusal(base + 'é'.repeat(1100))).message).toMatch(/at most 2048 bytes/);
  });

  it('refuses what is not an absolute URL', async () => {
    for (const url of ['/relative/path', 'not a url', '']) {
      expect((await refusal(url)).message).toBe('url: is not an absolute URL');
    }
  });
});

describe('the allow list (SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS)', () => {
  it('exempts exactly the ranges it names', async () => {
    const policy: OutboundPolicy = { allowHttp: true, allow: allowing('10.0.0.0/8, 127.0.0.1/32,fd00::/8') };
    expect((await checkHookTarget('https://10.1.2.3/hook', policy)).address).toBe('10.1.2.3');
    expect((await checkHookTarget('http://127.0.0.1:9/hook', policy)).address).toBe('127.0.0.1');
    expect((await checkHookTarget('https://[fd00::5]/hook', policy)).address).toBe('fd00::5');
    // Neighbours of an allowed range stay refused.
    for (const url of ['https://127.0.0.2/hook', 'https://192.168.1.1/hook', 'https://[fc00::1]/hook', 'https://169.254.169.254/']) {
      expect((await refusal(url, policy)).details).toEqual({ field: 'url' });
    }
  });

  it('parses CIDRs and names a bad entry', () => {
    expect(parseAllowList(undefined)).toBeInstanceOf(BlockList);
    expect(parseAllowList('')).toBeInstanceOf(BlockList);
    for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', 'example.com/8', '10.0.0.0/8,nope']) {
      expect(parseAllowList(bad)).toMatch(/is not a CIDR like 10\.0\.0\.0\/8$/);
    }
  });
});
