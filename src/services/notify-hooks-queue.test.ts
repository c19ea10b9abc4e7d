import { describe, expect, it } from 'vitest';
import { DeliveryScheduler, type AttemptResult, type QueuedNotification, type DeliveryRunner } from './notify-hooks-queue.ts';

// The scheduler alone, with a scripted runner: who gets a worker, when.

const ok: AttemptResult = { ok: true, status: 200, error: null, retry: false };
const busy: AttemptResult = { ok: false, status: 503, error: 'http 503', retry: true };

let seq = 0;
const delivery = (hookId: string): QueuedNotification => ({ hookId, endpointId: 'e', type: 'todo.ready', body: '{}', msgId: `m${++seq}`, attempts: 0 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function runner(answer: (d: QueuedNotification) => AttemptResult | 'gone' | Promise<AttemptResult | 'gone'>) {
  const log: string[] = [];
  const dropped: string[] = [];
  const r: DeliveryRunner = {
    attempt: async (d) => {
      log.push(`${d.hookId}:${d.msgId}`);
      return answer(d);
    },
    finish: async () => ({ stop: false }),
    dropped: (ds, why) => dropped.push(...ds.map((d) => `${d.msgId}:${why}`)),
    crashed: () => {},
  };
  return { r, log, dropped };
}

describe('DeliveryScheduler', () => {
  it("a retry waits on a timer holding no worker: another hook's delivery goes first", async () => {
    const { r, log } = runner((d) => (d.hookId === 'slow' && d.attempts === 0 ? busy : ok));
    const s = new DeliveryScheduler({ workers: 1, attempts: 3, backoffMs: [300], queueSize: 10, perHookQueue: 10 }, r);
    const a = delivery('slow');
    s.enqueue(a, false);
    await sleep(20);
    const b = delivery('fast');
    s.enqueue(b, false);
    await sleep(50);
    expect(log).toEqual([`slow:${a.msgId}`, `fast:${b.msgId}`]);
    await sleep(400);
    expect(log).toEqual([`slow:${a.msgId}`, `fast:${b.msgId}`, `slow:${a.msgId}`]);
    await s.stop();
  });

  it('one delivery per hook at a time, in order; hooks take turns', async () => {
    const { r, log } = runner(() => ok);
    const s = new DeliveryScheduler({ workers: 4, attempts: 1, backoffMs: [], queueSize: 10, perHookQueue: 10 }, r);
    const x = [delivery('x'), delivery('x'), delivery('x')];
    const y = delivery('y');
    for (const d of x) s.enqueue(d, false);
    s.enqueue(y, false);
    await sleep(50);
    expect(log).toEqual([`x:${x[0]!.msgId}`, `y:${y.msgId}`, `x:${x[1]!.msgId}`, `x:${x[2]!.msgId}`]);
    await s.stop();
  });

  it('failing hooks hold at most half the workers', async () => {
    let inFlight = 0;
    let most = 0;
    const { r } = runner(async () => {
      most = Math.max(most, ++inFlight);
      await sleep(30);
      inFlight--;
      return ok;
    });
    const s = new DeliveryScheduler({ workers: 4, attempts: 1, backoffMs: [], queueSize: 100, perHookQueue: 10 }, r);
    for (let i = 0; i < 10; i++) s.enqueue(delivery(`failing-${i}`), true);
    await sleep(200);
    expect(most).toBe(2);
    await s.stop();
  });

  it("a hook found gone drops its queued deliveries; a full hook queue drops the newest; stop drops what waits", async () => {
    const { r, log, dropped } = runner((d) => (d.hookId === 'gone' ? 'gone' : ok));
    const s = new DeliveryScheduler({ workers: 1, attempts: 1, backoffMs: [], queueSize: 10, perHookQueue: 2 }, r);
    const g = [delivery('gone'), delivery('gone')];
    for (const d of g) s.enqueue(d, false);
    const full = delivery('gone');
    expect(s.enqueue(full, false)).toBe(false);
    await sleep(30);
    expect(log).toEqual([`gone:${g[0]!.msgId}`]);
    expect(dropped).toEqual([`${full.msgId}:hook_full`, `${g[0]!.msgId}:hook_gone`, `${g[1]!.msgId}:hook_gone`]);
    expect(s.size).toBe(0);
    await s.stop();
    expect(s.enqueue(delivery('late'), false)).toBe(false);
    expect(dropped.at(-1)).toMatch(/:stopped$/);
  });
});
