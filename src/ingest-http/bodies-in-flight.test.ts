import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { INGEST_BODIES_IN_FLIGHT } from './routes.ts';
import { vend, withApp } from '../../test/support/fixtures.ts';

/**
 * Senders holding a valid webhook URL cannot make one instance buffer unbounded bodies: at most
 * INGEST_BODIES_IN_FLIGHT are read at once, the next is refused at once (503, retry), and a slot
 * is free again when its delivery ends.
 */
const f = withApp({ ingestLimit: { rate: 1000, burst: 1000 } });

/** Sends the head and a first byte of a POST promising `length` bytes, and keeps the socket open. */
function slowSender(url: string): Promise<net.Socket> {
  const { hostname, port, pathname } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(`POST ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{`);
      resolve(socket);
    });
    socket.on('error', reject);
  });
}

async function deliver(url: string): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title: 'a real delivery' }) });
}

describe('ingest bodies read at once', () => {
  it(`are at most ${INGEST_BODIES_IN_FLIGHT}: the next delivery gets 503 with Retry-After, and one is accepted once a slot frees`, async () => {
    const e = await vend(f.api, { name: 'hooked', queues: ['inbox'] });
    const hook = await f.api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic' });
    expect(hook.status, hook.text).toBe(201);
    const url = hook.json.ingest_url as string;
    const senders: net.Socket[] = [];
    try {
      for (let i = 0; i < INGEST_BODIES_IN_FLIGHT; i++) senders.push(await slowSender(url));
      // The server has taken every head before the next delivery arrives.
      await new Promise((r) => setTimeout(r, 300));
      const refused = await deliver(url);
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(await refused.json()).toMatchObject({ code: 'unavailable' });
      senders.pop()!.destroy();
      await new Promise((r) => setTimeout(r, 200));
      const accepted = await deliver(url);
      expect(accepted.status, await accepted.clone().text()).toBe(202);
    } finally {
      for (const s of senders) s.destroy();
    }
  });
});
