import { beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, startTestApp } from '../../../test/support/app.ts';
import type { App } from '../../app.ts';
import { ManualClock } from '../../lib/clock.ts';
import {
  agent,
  app,
  db,
  extraApps,
  human,
  instrument,
  ringOne,
  type TestApp,
  useAcksSuite,
  vend,
  WINDOW_MS,
} from '../../../test/support/doorbell-acks.ts';

// Doorbell acknowledgement end to end: the doorbell counters on the /metrics scrape.

useAcksSuite();

const METRICS_TOKEN = 'm'.repeat(40);

describe('GET /metrics (REQ-6)', () => {
  let m: TestApp;
  const scrape = (token?: string, on: App = m) =>
    fetch(`${on.url}/metrics`, { headers: token === undefined ? {} : { authorization: token } }).then(async (r) => ({ status: r.status, body: await r.text(), headers: r.headers }));

  beforeAll(async () => {
    m = instrument(await startTestApp(db.url, new ManualClock(app.clock.now()), { env: { SWITCHBOARD_METRICS_TOKEN: METRICS_TOKEN } }));
    extraApps.push(m);
  });

  it('the first scrape has every doorbell series, and each collection-error series at 0', async () => {
    const r = await scrape(`Bearer ${METRICS_TOKEN}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    for (const line of [
      'switchboard_metrics_collection_errors_total{collector="doorbell_rings"} 0',
      'switchboard_metrics_collection_errors_total{collector="queue"} 0',
      'switchboard_doorbell_rings_total{kind="todo"} 0',
      'switchboard_doorbell_rings_total{kind="digest"} 0',
      'switchboard_doorbell_rings_acknowledged_total{kind="todo",via="claim"} 0',
      'switchboard_doorbell_rings_acknowledged_total{kind="digest",via="ack"} 0',
      'switchboard_doorbell_rings_unheard_total{kind="todo"} 0',
      'switchboard_doorbell_rings_unheard_total{kind="digest"} 0',
      'switchboard_doorbell_unheard_sessions 0',
    ]) {
      expect(r.body.split('\n')).toContain(line);
    }
    for (const type of ['# TYPE switchboard_doorbell_rings_total counter', '# TYPE switchboard_doorbell_unheard_sessions gauge', '# TYPE switchboard_doorbell_rings_unheard_total counter']) {
      expect(r.body).toContain(type);
    }
  });

  it('answers the same empty 401 without a token, with a wrong one, and when no token is configured', async () => {
    const refusals = [
      await scrape(undefined),
      await scrape(`Bearer ${'x'.repeat(40)}`),
      await scrape(`Bearer ${METRICS_TOKEN}x`),
      await scrape(`Basic ${METRICS_TOKEN}`),
      await scrape(`Bearer ${METRICS_TOKEN}`, app),
      await scrape('Bearer ', app),
    ];
    for (const r of refusals) {
      expect(r.status).toBe(401);
      expect(r.body).toBe('');
    }
  });

  it('names no endpoint, session, ring, todo or slug, whatever rang', async () => {
    const viaM = apiCaller(m.url, human.token);
    const e = await vend(['reviews'], viaM);
    const a = await agent(e, m);
    const acked = await ringOne(e, a, 'acked', viaM, m);
    await a.call('ack_doorbell', { ring_id: acked.ring.ring_id });
    m.clock.advance(1000);
    const claimed = await ringOne(e, a, 'claimed', viaM, m);
    await a.call('claim', { id: claimed.todoId });
    m.clock.advance(1000);
    const ignored = await ringOne(e, a, 'ignored', viaM, m);
    m.clock.advance(WINDOW_MS + 1000);
    await m.services.acks.sweep();
    const r = await scrape(`Bearer ${METRICS_TOKEN}`);
    expect(r.status).toBe(200);
    expect(r.body).toContain('switchboard_doorbell_rings_total{kind="todo"} 3');
    expect(r.body).toContain('switchboard_doorbell_rings_acknowledged_total{kind="todo",via="ack"} 1');
    expect(r.body).toContain('switchboard_doorbell_rings_acknowledged_total{kind="todo",via="claim"} 1');
    expect(r.body).toContain('switchboard_doorbell_rings_unheard_total{kind="todo"} 1');
    const identifiers = [e.id, e.slug, a.sessionId, ...[acked, claimed, ignored].flatMap((x) => [x.todoId, x.ring.ring_id])];
    const [agentRow] = await db.sql`select agent_id::text as agent_id from endpoints where id = ${e.id}`;
    identifiers.push(agentRow!.agent_id);
    for (const id of identifiers) expect(r.body).not.toContain(id);
    expect(r.body).not.toMatch(/rg_[0-9A-Z]{26}|td_[0-9a-f-]{36}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/);
    for (const line of r.body.split('\n').filter((l) => l.startsWith('switchboard_doorbell_'))) {
      expect(line).toMatch(/^switchboard_doorbell_[a-z_]+(\{(kind|via)="[a-z]+"(,via="[a-z]+")?\})? \d+$/);
    }
  });
});