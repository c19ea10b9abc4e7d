import { describe, expect, it } from 'vitest';
import { withApp } from '../../test/support/fixtures.ts';

/** SWITCHBOARD_INGEST_RATE: the ceiling on valid deliveries to one webhook, per second (burst twice that). */
const f = withApp({ env: { SWITCHBOARD_INGEST_RATE: '2' } });

async function genericWebhook(name: string): Promise<string> {
  const e = await f.api('POST', '/api/v1/endpoints', { name, queues: ['alerts'] });
  const w = await f.api('POST', `/api/v1/endpoints/${e.json.slug}/webhooks`, { source_type: 'generic', target_queue: 'alerts' });
  expect(w.status).toBe(201);
  return w.json.ingest_url as string;
}

const deliver = (url: string, title: string) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title }) });

describe('POST /webhooks/w/{token} under SWITCHBOARD_INGEST_RATE=2', () => {
  it('accepts a burst of 4 to one webhook, then 429 naming the setting; other webhooks are unaffected; time refills it', async () => {
    const busy = await genericWebhook('busy');
    const quiet = await genericWebhook('quiet');
    for (let i = 0; i < 4; i++) expect((await deliver(busy, `alert ${i}`)).status, `delivery ${i}`).toBe(202);
    const over = await deliver(busy, 'one too many');
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toBe('1');
    expect(await over.json()).toEqual({
      code: 'rate_limited',
      error: 'this webhook is receiving more than 2 deliveries a second (SWITCHBOARD_INGEST_RATE)',
      retry_after: 1,
    });
    expect((await deliver(quiet, 'elsewhere')).status).toBe(202);
    f.app.clock.advance(1000);
    expect((await deliver(busy, 'later')).status).toBe(202);
  });
});
