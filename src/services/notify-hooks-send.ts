import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { NOTIFY_HOOK_MARKER } from '../domain/hook-marker.ts';
import type { SecretBox } from '../lib/crypto-box.ts';
import { signatureHeader } from '../lib/hook-signing.ts';
import { checkHookTarget, type OutboundPolicy } from '../lib/ssrf.ts';
import { VERSION } from '../lib/version.ts';
import type { HookRow } from '../store/hooks.ts';
import type { AttemptResult } from './notify-hooks-queue.ts';

/**
 * One notify hook attempt: the address is checked again and exactly that address is dialled,
 * signed with the hook's secret (and the previous one during a rotation's grace), marked as a
 * hook delivery, bounded by `timeoutMs` as a whole.
 */
export async function sendHookRequest(
  hook: HookRow,
  job: { msgId: string; body: string },
  ctx: { box: SecretBox; policy: OutboundPolicy; timeoutMs: number; now: Date },
): Promise<AttemptResult> {
  let target;
  try {
    target = await checkHookTarget(hook.url, ctx.policy);
  } catch (err) {
    return { ok: false, status: null, error: `rejected: ${(err as Error).message}`, retry: false };
  }
  const { now, timeoutMs } = ctx;
  const timestamp = Math.floor(now.getTime() / 1000);
  const secrets = [ctx.box.open(hook.secret)];
  if (hook.prev_secret && hook.prev_secret_expires_at && hook.prev_secret_expires_at > now) secrets.push(ctx.box.open(hook.prev_secret));
  // Dial exactly the address that was checked: no second DNS answer can slip in.
  const lookup: LookupFunction = (_host, options, cb) => {
    if ((options as { all?: boolean }).all) (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: target.address, family: target.family }]);
    else cb(null, target.address, target.family);
  };
  const request = target.url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const req = request(
      target.url,
      {
        method: 'POST',
        lookup,
        servername: target.url.hostname,
        timeout: timeoutMs,
        headers: {
          'content-type': 'application/json',
          'user-agent': `switchboard/${VERSION}`,
          'webhook-id': job.msgId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, job.msgId, timestamp, job.body),
          [NOTIFY_HOOK_MARKER.toLowerCase()]: hook.id,
        },
      },
      (res: IncomingMessage) => {
        let read = 0;
        res.on('data', (c: Buffer) => {
          read += c.length;
          if (read > 64 * 1024) res.destroy();
        });
        const status = res.statusCode ?? 0;
        res.on('close', () => {
          const ok = status >= 200 && status < 300;
          resolve({ ok, status, error: ok ? null : status >= 300 && status < 400 ? 'redirect refused' : `http ${status}`, retry: status === 408 || status === 429 || status >= 500 });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    // The socket timeout only fires on silence: this bounds the attempt as a whole, so a receiver
    // trickling bytes cannot hold a worker past the timeout.
    const deadline = setTimeout(() => req.destroy(new Error('timeout')), timeoutMs);
    req.on('close', () => clearTimeout(deadline));
    req.on('error', (err) => resolve({ ok: false, status: null, error: err.message === 'timeout' ? 'timeout' : `network: ${(err as NodeJS.ErrnoException).code ?? err.message}`, retry: true }));
    req.end(job.body);
  });
}

/** The attempt's result class for the attempts metric. */
export function attemptClass(r: AttemptResult): string {
  if (r.ok) return '2xx';
  if (r.status !== null) return `${Math.floor(r.status / 100)}xx`;
  if (r.error === 'timeout') return 'timeout';
  if (r.error?.startsWith('rejected')) return 'rejected_ssrf';
  return 'network';
}
