import { lookup } from 'node:dns/promises';
import { networkInterfaces } from 'node:os';
import { BlockList, isIP } from 'node:net';
import { invalidArgument } from '../domain/errors.ts';

/**
 * Outbound safety for notify hooks: https only (http when allowed for tests), no userinfo, and
 * never an address that is not public unless the allow list names it: IPv4 by a block list
 * (loopback, private, link-local, unspecified, multicast, shared CGNAT, documentation, broadcast),
 * IPv6 by an allow list (global unicast 2000::/3 only, less its special ranges, so every
 * transition prefix that embeds an IPv4 address is refused). Ports 80 and 443 only, unless
 * configured or the address is on the allow list. The checked address is the one dialled, so a
 * DNS answer cannot change between the check and the call.
 */
export interface OutboundPolicy {
  allowHttp: boolean;
  /** CIDRs exempt from the non-public rule and the port rule (SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS). */
  allow: BlockList;
  /** Ports a hook may use (SWITCHBOARD_NOTIFY_HOOK_PORTS): a list, or 'any'. Default 80 and 443. */
  ports?: readonly number[] | 'any';
  /** Resolves a host name (default: the system resolver); tests pass a stub. */
  resolve?: (host: string) => Promise<{ address: string; family: number }>;
}

export const DEFAULT_HOOK_PORTS: readonly number[] = [80, 443];

export const MAX_HOOK_URL_BYTES = 2048;

const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NON_PUBLIC.addSubnet(net, prefix, 'ipv4');

const GLOBAL_UNICAST = new BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');
// Inside 2000::/3 but not a host to call: IETF protocol assignments (Teredo 2001::/32 among them),
// documentation (2001:db8::/32, 3fff::/20) and 6to4 (2002::/16, which embeds an IPv4 address).
const IPV6_SPECIAL = new BlockList();
for (const [net, prefix] of [['2001::', 23], ['2001:db8::', 32], ['2002::', 16], ['3fff::', 20]] as const) IPV6_SPECIAL.addSubnet(net, prefix, 'ipv6');

/** Parses SWITCHBOARD_NOTIFY_HOOK_PORTS (`80,443,8443`, or `any`). */
export function parsePorts(raw: string | undefined): readonly number[] | 'any' | string {
  if (raw === undefined) return DEFAULT_HOOK_PORTS;
  if (raw.trim() === 'any') return 'any';
  const ports: number[] = [];
  for (const part of raw.split(',').map((p) => p.trim()).filter(Boolean)) {
    if (!/^\d{1,5}$/.test(part) || Number(part) < 1 || Number(part) > 65535) return `${JSON.stringify(part)} is not a port from 1 to 65535 (or say any)`;
    ports.push(Number(part));
  }
  return ports.length ? ports : 'must list at least one port, or say any';
}

/** Parses SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS (`10.0.0.0/8,127.0.0.1/32,fd00::/8`). */
export function parseAllowList(raw: string | undefined): BlockList | string {
  const list = new BlockList();
  for (const part of (raw ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
    const m = /^([^/]+)\/(\d{1,3})$/.exec(part);
    const family = m ? isIP(m[1]!) : 0;
    if (!m || family === 0 || Number(m[2]) > (family === 4 ? 32 : 128)) return `${JSON.stringify(part)} is not a CIDR like 10.0.0.0/8`;
    list.addSubnet(m[1]!, Number(m[2]), family === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

function isNonPublic(address: string, family: 4 | 6): boolean {
  if (family === 4) return NON_PUBLIC.check(address, 'ipv4');
  // An allow list, not a block list: ::/96, ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, link-local,
  // unique-local and multicast all fall outside 2000::/3.
  return !GLOBAL_UNICAST.check(address, 'ipv6') || IPV6_SPECIAL.check(address, 'ipv6');
}

const systemResolve = (host: string) => lookup(host, { all: false, verbatim: true });

export interface CheckedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/** Validates a hook URL and resolves it to one address that may be dialled; refusals name `url`. */
export async function checkHookTarget(raw: string, policy: OutboundPolicy): Promise<CheckedTarget> {
  if (Buffer.byteLength(raw) > MAX_HOOK_URL_BYTES) throw invalidArgument('url', `must be at most ${MAX_HOOK_URL_BYTES} bytes`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidArgument('url', 'is not an absolute URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    throw invalidArgument('url', policy.allowHttp ? 'must use https or http' : 'must use https');
  }
  if (url.username || url.password) throw invalidArgument('url', 'must not carry a user name or password');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let address: string;
  let family: 4 | 6;
  const literal = isIP(host);
  if (literal) {
    address = host;
    family = literal as 4 | 6;
  } else {
    try {
      const found = await (policy.resolve ?? systemResolve)(host);
      address = found.address;
      family = found.family as 4 | 6;
    } catch {
      throw invalidArgument('url', `host ${host} does not resolve`);
    }
  }
  const allowed = policy.allow.check(address, family === 4 ? 'ipv4' : 'ipv6');
  if (isNonPublic(address, family) && !allowed) {
    throw invalidArgument('url', `resolves to ${address}, which is not a public address (allow it with SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS)`);
  }
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  const ports = policy.ports ?? DEFAULT_HOOK_PORTS;
  if (ports !== 'any' && !ports.includes(port) && !allowed) {
    throw invalidArgument('url', `port ${port} is not allowed (only ${ports.join(', ')}; allow others with SWITCHBOARD_NOTIFY_HOOK_PORTS)`);
  }
  return { url, address, family };
}

/** Where this server answers: its public base URL and the address and port it listens on. */
export interface SelfAddress {
  baseUrl: string;
  listenHost: string;
  listenPort: number;
}

/**
 * Whether a checked hook target reaches this server itself: its base URL's origin, or its listen
 * port on the listen address (on every loopback and local interface address when it listens on
 * all of them). A hook there would turn each notification into a delivery to our own ingest.
 */
export function pointsAtSelf(target: Pick<CheckedTarget, 'url' | 'address'>, self: SelfAddress): boolean {
  if (target.url.origin === new URL(self.baseUrl).origin) return true;
  const port = Number(target.url.port || (target.url.protocol === 'https:' ? 443 : 80));
  if (port !== self.listenPort) return false;
  const address = target.address.replace(/^::ffff:/, '');
  if (self.listenHost !== '0.0.0.0' && self.listenHost !== '::') return address === self.listenHost.replace(/^\[|\]$/g, '');
  const local = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
  return address.startsWith('127.') || address === '::1' || local.includes(address);
}
