import { BlockList } from 'node:net';
import { describe, expect, it } from 'vitest';
import { SwitchboardError } from '../domain/errors.ts';
import { DEFAULT_HOOK_PORTS, MAX_HOOK_URL_BYTES, checkHookTarget, parseAllowList, parsePorts, type OutboundPolicy } from './ssrf.ts';

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
    // IPv6 is judged by an allow list (global unicast 2000::/3 less its special ranges): every
    // prefix that carries an IPv4 address inside it, loopback's included, is refused.
    ['IPv4-compatible ::/96 carrying loopback', 'https://[::127.0.0.1]/hook'],
    ['IPv4-compatible ::/96 carrying a public address', 'https://[::93.184.216.34]/hook'],
    ['IPv4-mapped ::ffff:0:0/96 carrying a public address', 'https://[::ffff:93.184.216.34]/hook'],
    ['IPv4-translated ::ffff:0:0:0/96', 'https://[::ffff:0:7f00:1]/hook'],
    ['NAT64 64:ff9b::/96', 'https://[64:ff9b::7f00:1]/hook'],
    ['local-use NAT64 64:ff9b:1::/48', 'https://[64:ff9b:1::a00:1]/hook'],
    ['6to4 2002::/16 carrying loopback', 'https://[2002:7f00:1::1]/hook'],
    ['6to4 2002::/16 carrying a public address', 'https://[2002:5db8:d822::1]/hook'],
    ['Teredo 2001::/32', 'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook'],
    ['IETF protocol assignments 2001::/23', 'https://[2001:2::1]/hook'],
    ['IPv6 documentation 2001:db8::/32', 'https://[2001:db8::1]/hook'],
    ['IPv6 documentation 3fff::/20', 'https://[3fff::1]/hook'],
    ['discard-only 100::/64', 'https://[100::1]/hook'],
    ['IPv6 multicast', 'https://[ff02::1]/hook'],
    ['outside global unicast (4000::/3)', 'https://[4000::1]/hook'],
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

describe('checkHookTarget: host names judged by what they resolve to (a resolver stub, nothing dialled)', () => {
  const resolvingTo = (address: string, family: 4 | 6): OutboundPolicy => ({ ...strict, resolve: async () => ({ address, family }) });

  for (const [address, family] of [
    ['2002:7f00:1::1', 6],
    ['64:ff9b::a9fe:a9fe', 6],
    ['64:ff9b:1::a00:1', 6],
    ['::ffff:7f00:1', 6],
    ['::7f00:1', 6],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 6],
    ['fd12:3456::1', 6],
    ['169.254.169.254', 4],
  ] as const) {
    it(`refuses a name that resolves to ${address}`, async () => {
      const err = await refusal('https://hooks.example.com/hook', resolvingTo(address, family));
      expect(err).toMatchObject({ code: 'invalid_argument', details: { field: 'url' } });
      expect(err.message).toBe(`url: resolves to ${address}, which is not a public address (allow it with SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS)`);
    });
  }

  it('accepts a name that resolves to a global unicast address and answers that address', async () => {
    const t = await checkHookTarget('https://hooks.example.com/hook', resolvingTo('2606:4700::6810:84e5', 6));
    expect(t).toMatchObject({ address: '2606:4700::6810:84e5', family: 6 });
  });
});

describe('checkHookTarget: ports (SWITCHBOARD_NOTIFY_HOOK_PORTS)', () => {
  it('allows 80 and 443 by default and refuses any other port, naming url', async () => {
    expect(DEFAULT_HOOK_PORTS).toEqual([80, 443]);
    expect((await checkHookTarget('https://93.184.216.34/hook', strict)).url.port).toBe('');
    expect((await checkHookTarget('https://93.184.216.34:80/hook', strict)).address).toBe('93.184.216.34');
    expect((await checkHookTarget('http://93.184.216.34:443/hook', { ...strict, allowHttp: true })).address).toBe('93.184.216.34');
    for (const [url, port] of [['https://93.184.216.34:8443/hook', 8443], ['https://93.184.216.34:25/', 25], ['https://[2606:4700::1]:6379/', 6379], ['http://93.184.216.34/', null]] as const) {
      const policy = port === null ? { ...strict, allowHttp: true, ports: [443] } : strict;
      const err = await refusal(url, policy);
      expect(err).toMatchObject({ code: 'invalid_argument', details: { field: 'url' } });
      expect(err.message).toMatch(new RegExp(`^url: port ${port ?? 80} is not allowed \\(only .*; allow others with SWITCHBOARD_NOTIFY_HOOK_PORTS\\)$`));
    }
  });

  it('a configured list replaces the default; any allows every port; the allow list exempts its addresses', async () => {
    expect((await checkHookTarget('https://93.184.216.34:8443/hook', { ...strict, ports: [8443] })).address).toBe('93.184.216.34');
    expect((await refusal('https://93.184.216.34/hook', { ...strict, ports: [8443] })).message).toMatch(/^url: port 443 is not allowed/);
    expect((await checkHookTarget('https://93.184.216.34:1/hook', { ...strict, ports: 'any' })).address).toBe('93.184.216.34');
    // A receiver the operator allowed by address (tests: a loopback port chosen by the OS) may use any port.
    expect((await checkHookTarget('http://127.0.0.1:54321/hook', { allowHttp: true, allow: allowing('127.0.0.1/32') })).address).toBe('127.0.0.1');
  });

  it('parses the setting and names a bad entry', () => {
    expect(parsePorts(undefined)).toEqual([80, 443]);
    expect(parsePorts('443, 8443')).toEqual([443, 8443]);
    expect(parsePorts('any')).toBe('any');
    for (const bad of ['0', '65536', 'http', '443,x', '-1']) expect(parsePorts(bad)).toMatch(/is not a port from 1 to 65535 \(or say any\)$/);
    expect(parsePorts(',')).toBe('must list at least one port, or say any');
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
