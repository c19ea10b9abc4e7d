import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../src/app.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/lib/log.ts';
import { apiCaller, humanWithToken, migratedDatabase } from './support/app.ts';
import { push, vend } from './support/fixtures.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: App;
let logged = '';

beforeAll(async () => {
  db = await migratedDatabase();
  const sink = new Writable({
    write(chunk, _enc, done) {
      logged += chunk.toString();
      done();
    },
  });
  const config = loadConfig({ SWITCHBOARD_DATABASE_URL: db.url, SWITCHBOARD_LISTEN: '127.0.0.1:0' });
  app = await startApp({ config, clock: new ManualClock(), log: createLogger('debug', sink), loops: false });
});
afterAll(async () => {
  await app.stop();
  await db.drop();
});

describe('logs', () => {
  it('never carry a personal token or an endpoint credential, even at debug level and on failures', async () => {
    const human = await humanWithToken(db.sql);
    const call = apiCaller(app.url, human.token);
    const e = await vend(call, { name: 'bot' });
    const credential: string = e.token;
    await push(call, e, { title: 'x' });
    await apiCaller(app.url, credential)('GET', '/api/v1/endpoints');
    await apiCaller(app.url, 'sbp_not-a-real-token')('GET', '/api/v1/endpoints');
    await call('POST', '/api/v1/endpoints', '{"broken');
    expect(logged).toContain('http request');
    for (const secret of [human.token, credential, 'sbp_not-a-real-token']) expect(logged).not.toContain(secret);
    expect(logged).not.toMatch(/sb[kp]_[A-Za-z0-9_-]{20,}/);
  });
});
