import { VERSION } from '../lib/version.ts';
import type { ErrorEnvelope } from '../api/wire.ts';
import type { Credentials } from './credentials.ts';
import { CliError } from './output.ts';

/** A thin /api/v1 client. Failures become a one-line CliError carrying the server's code. */
export class ApiClient {
  constructor(
    private readonly creds: Credentials,
    private readonly timeoutMs = 30_000,
  ) {}

  get baseUrl(): string {
    return this.creds.url;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    let res: Response;
    try {
      res = await fetch(`${this.creds.url}/api/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.creds.token}`,
          'user-agent': `switchboard-cli/${VERSION}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
      throw new CliError(`cannot reach ${this.creds.url}: ${cause}`);
    }
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* keep the text */
    }
    if (!res.ok) {
      const env = (parsed && typeof parsed === 'object' ? parsed : {}) as Partial<ErrorEnvelope>;
      const message = env.error ?? `HTTP ${res.status}`;
      throw new CliError(`${message} (${env.code ?? `http_${res.status}`})`);
    }
    return { status: res.status, body: parsed as T };
  }

  async get<T>(path: string): Promise<T> {
    return (await this.request<T>('GET', path)).body;
  }

  async post<T>(path: string, body?: unknown): Promise<T> {
    return (await this.request<T>('POST', path, body ?? {})).body;
  }
}
