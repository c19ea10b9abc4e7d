// Shared by the OAuth end-to-end files (test/oauth-mcp-sdk.test.ts, test/oauth-errors.test.ts): the
// human's side of an authorization (the consent form read and answered without a browser engine), an
// in-memory OAuthClientProvider for the MCP SDK, and the expected wire values spelled out, so a
// drifting constant fails a test rather than following the server.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { expect } from 'vitest';
import type { Notification } from './agents.ts';

/** A loopback redirect no one listens on: the test reads the code from the 303's Location instead. */
export const LOOPBACK_REDIRECT = 'http://127.0.0.1:47913/oauth/callback';

/** What every 401 of an endpoint's MCP URL carries. */
export const mcpChallenge = (base: string, slug: string): string =>
  `Bearer realm="switchboard", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp/${slug}"`;

/** What every 401 of /api/v1 carries. */
export const apiChallenge = (base: string): string => `Bearer realm="switchboard-api", resource_metadata="${base}/.well-known/oauth-protected-resource/api"`;

/** A page the test can send requests from: the board browser of test/support/board.ts, or anything shaped like it. */
export interface Browsing {
  request(method: string, path: string, form?: Record<string, string | string[]>, headers?: Record<string, string>): Promise<{ status: number; headers: Headers; text: string }>;
}

const unescapeHtml = (s: string): string =>
  s.replace(/&(amp|lt|gt|quot|#39|#x27|#96);/g, (_m, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", '#x27': "'", '#96': '`' })[e]!);

function attributes(tag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of tag.matchAll(/([a-zA-Z_:][-a-zA-Z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'))?/g)) {
    if (m[1]!.toLowerCase() === 'input' || m[1]!.toLowerCase() === 'form' || m[1]!.toLowerCase() === 'button') continue;
    out[m[1]!.toLowerCase()] = unescapeHtml(m[2] ?? m[3] ?? '');
  }
  return out;
}

export interface ConsentForm {
  method: string;
  action: string;
  /** The hidden inputs, by name. */
  hidden: Record<string, string>;
  /** The values of the submit buttons named `decision`. */
  decisions: string[];
}

/** The consent page's one form to /oauth/authorize, read as a browser would submit it. */
export function consentForm(page: string): ConsentForm {
  const forms = [...page.matchAll(/<form\b[^>]*>([\s\S]*?)<\/form>/gi)]
    .map((m) => ({ tag: attributes(m[0].slice(0, m[0].indexOf('>') + 1)), body: m[1]! }))
    .filter((f) => f.tag.action === '/oauth/authorize');
  expect(forms, 'the consent page has exactly one form posting to /oauth/authorize').toHaveLength(1);
  const form = forms[0]!;
  const hidden: Record<string, string> = {};
  for (const m of form.body.matchAll(/<input\b[^>]*>/gi)) {
    const a = attributes(m[0]);
    if (a.type === 'hidden' && a.name) hidden[a.name] = a.value ?? '';
  }
  const decisions: string[] = [];
  for (const m of form.body.matchAll(/<(button|input)\b[^>]*>/gi)) {
    const a = attributes(m[0]);
    if (a.name === 'decision' && (a.type === 'submit' || (m[1]!.toLowerCase() === 'button' && (a.type ?? 'submit') === 'submit'))) decisions.push(a.value ?? '');
  }
  return { method: (form.tag.method ?? 'get').toLowerCase(), action: form.tag.action!, hidden, decisions };
}

/** The path and query of an absolute authorization URL, as the browser requests it of `base`. */
export function pathOf(url: URL | string, base: string): string {
  const u = new URL(url);
  expect(u.origin, 'the authorization URL is on the server the client was given').toBe(new URL(base).origin);
  return `${u.pathname}${u.search}`;
}

/**
 * The signed-in human at the consent page: GET the authorization URL (200, the form), then submit
 * it with `decision`. Resolves with the 303's Location, parsed.
 */
export async function answerConsent(b: Browsing, authorizationUrl: URL | string, base: string, decision: 'approve' | 'deny' = 'approve'): Promise<{ location: URL; form: ConsentForm; page: string }> {
  const page = await b.request('GET', pathOf(authorizationUrl, base));
  expect(page.status, page.text.slice(0, 2000)).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  const form = consentForm(page.text);
  expect(form.method).toBe('post');
  expect(Object.keys(form.hidden).sort()).toEqual(
    expect.arrayContaining(['client_id', 'code_challenge', 'code_challenge_method', 'csrf_token', 'redirect_uri', 'resource', 'state']),
  );
  expect(form.decisions.sort()).toEqual(['approve', 'deny']);
  const answered = await b.request('POST', form.action, { ...form.hidden, decision });
  expect(answered.status, answered.text.slice(0, 2000)).toBe(303);
  const location = answered.headers.get('location');
  expect(location, 'the answer redirects to the client').toBeTruthy();
  return { location: new URL(location!), form, page: page.text };
}

/**
 * An OAuthClientProvider that keeps everything in memory, as a desktop client would keep it on
 * disk. `redirectToAuthorization` hands the URL to `consent` (the test's human), which answers
 * the code the client would have received at its redirect URI.
 */
export class MemoryProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  stored?: OAuthTokens;
  verifier?: string;
  /** Every authorization URL the SDK sent the human to. */
  readonly authorizations: URL[] = [];
  /** The code the human's answer carried, waiting for transport.finishAuth. */
  code?: string;
  /** Every token set saved, in order (a refresh appends one). */
  readonly saved: OAuthTokens[] = [];
  readonly invalidated: string[] = [];

  constructor(
    /** The human's answer to an authorization URL: the code (a test may swap it, e.g. to refuse a second consent). */
    public consent: (authorizationUrl: URL) => Promise<string | undefined>,
    readonly name = 'sdk-e2e-client',
  ) {}

  get redirectUrl(): string {
    return LOOPBACK_REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [LOOPBACK_REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state(): string {
    return `st-${Math.random().toString(36).slice(2)}`;
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.client = info;
  }
  tokens() {
    return this.stored;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.stored = tokens;
    this.saved.push(tokens);
  }
  async redirectToAuthorization(url: URL): Promise<void> {
    this.authorizations.push(url);
    this.code = await this.consent(url);
  }
  saveCodeVerifier(v: string): void {
    this.verifier = v;
  }
  codeVerifier(): string {
    if (!this.verifier) throw new Error('no code verifier saved');
    return this.verifier;
  }
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    this.invalidated.push(scope);
    if (scope === 'all' || scope === 'tokens') this.stored = undefined;
    if (scope === 'all' || scope === 'client') this.client = undefined;
  }
}

export interface OAuthAgent {
  client: Client;
  transport: StreamableHTTPClientTransport;
  sessionId: string;
  heard: Notification[];
  /** Every HTTP exchange of the transport and of its OAuth calls: method, URL, status, answering backend. */
  exchanges: { method: string; url: string; status: number; servedBy: string | null }[];
  call: (name: string, args?: Record<string, unknown>) => Promise<any>;
  close(): Promise<void>;
}

/**
 * The SDK's whole OAuth path from the MCP URL alone: the first connect meets the 401, discovers,
 * registers and sends the human to consent (the provider drives it), and fails with
 * UnauthorizedError as a real client does when it hands off to a browser; finishAuth trades the
 * code; a second connect, on a fresh transport, carries the token.
 */
export async function connectByUrl(mcpUrl: string, provider: MemoryProvider): Promise<OAuthAgent> {
  const exchanges: OAuthAgent['exchanges'] = [];
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    exchanges.push({ method: init?.method ?? 'GET', url, status: res.status, servedBy: res.headers.get('x-served-by') });
    return res;
  };
  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: recording });
  const refused = new Client({ name: provider.name, version: '1.0.0' });
  await expect(refused.connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.code, 'the consent step produced a code').toBeTruthy();
  await first.finishAuth(provider.code!);
  await first.close().catch(() => {});
  return connectWithTokens(mcpUrl, provider, exchanges, recording);
}

/** A Client on a fresh transport whose provider already holds tokens. */
export async function connectWithTokens(
  mcpUrl: string,
  provider: MemoryProvider,
  exchanges: OAuthAgent['exchanges'] = [],
  recording: typeof fetch = fetch,
): Promise<OAuthAgent> {
  const heard: Notification[] = [];
  const client = new Client({ name: provider.name, version: '1.0.0' });
  client.fallbackNotificationHandler = async (n) => void heard.push(n as unknown as Notification);
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: recording });
  await client.connect(transport);
  return {
    client,
    transport,
    sessionId: transport.sessionId!,
    heard,
    exchanges,
    async call(name, args = {}) {
      const r = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
      const text = r.content[0]!.text;
      return r.isError ? { error: text } : JSON.parse(text);
    },
    close: () => client.close().catch(() => {}),
  };
}
