// The board's live-update stream (/events) from the outside: a reading client, a client that
// stops reading, and a burst of endpoint changes big enough to fill a socket.

import { connect as netConnect, type Socket } from 'node:net';
import type { Sql } from '../../src/db/connect.ts';

export interface ReadStream {
  /** Frames parsed so far. */
  events: { event: string; data: any }[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

/** Opens /events with a session cookie and parses its frames in the background. */
export async function readStream(baseUrl: string, cookie: string): Promise<ReadStream> {
  const ac = new AbortController();
  const res = await fetch(`${baseUrl}/events`, { headers: { cookie }, signal: ac.signal });
  if (res.status !== 200) throw new Error(`/events answered ${res.status}`);
  const events: ReadStream['events'] = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const ended = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const ev = /^event: (.+)$/m.exec(frame)?.[1];
          const data = /^data: (.+)$/m.exec(frame)?.[1];
          if (ev && data) events.push({ event: ev, data: JSON.parse(data) });
        }
      }
    } catch {
      /* aborted */
    }
  })();
  return { events, ended, close: () => ac.abort() };
}

export interface StalledStream {
  socket: Socket;
  /** Starts reading again: counts bytes and `ready` events from then on. */
  resume(): void;
  readonly readies: number;
  readonly bytes: number;
  /** Resolves when the server has closed the connection (seen only once reading again). */
  closed: Promise<void>;
}

/** GET /events on a raw socket that reads the response head and then stops reading. */
export async function stalledStream(baseUrl: string, cookie: string): Promise<StalledStream> {
  const port = Number(new URL(baseUrl).port);
  const socket = netConnect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(`GET /events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nCookie: ${cookie}\r\nAccept: text/event-stream\r\n\r\n`);
  let head = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      socket.pause();
      resolve();
    };
    socket.on('data', onData).once('error', reject);
  });
  if (!/^HTTP\/1\.1 200 /.test(head)) throw new Error(`/events answered ${head.split('\r\n')[0]}`);
  let tail = head.slice(head.indexOf('\r\n\r\n') + 4);
  let bytes = 0;
  let readies = 0;
  const READY = 'event: ready\n';
  const count = (s: string) => s.split(READY).length - 1;
  readies = count(tail);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => {});
  return {
    socket,
    resume() {
      socket.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        // A marker split across two chunks is counted once: the carried tail is shorter than it.
        const text = tail + chunk.toString('latin1');
        readies += count(text);
        tail = text.slice(-(READY.length - 1));
      });
      socket.resume();
    },
    get readies() {
      return readies;
    },
    get bytes() {
      return bytes;
    },
    closed,
  };
}

/** Gives a human `n` more endpoints, written straight in SQL (vending them one by one would take minutes). */
export async function manyEndpoints(sql: Sql, humanId: string, n: number): Promise<void> {
  await sql`
    with made as (
      insert into agents (owner_human_id, name)
      select ${humanId}, 'bulk-' || g from generate_series(1, ${n}) g
      returning id
    )
    insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues)
    select id, 'bulk-' || replace(id::text, '-', ''), 'bulk:' || id::text, 'sbk_bulk', '{work}' from made`;
}

/**
 * Flips the presence override and moves last_seen_at of every endpoint of the human: the next
 * look of the board's live updates sends each endpoint a `presence` and an `endpoint` frame.
 */
export async function churnEndpoints(sql: Sql, humanId: string): Promise<void> {
  await sql`
    update endpoints e
    set presence_override = case when e.presence_override = 'out' then 'in' else 'out' end,
        override_by = 'human', override_set_at = clock_timestamp(), last_seen_at = clock_timestamp()
    from agents a where a.id = e.agent_id and a.owner_human_id = ${humanId}`;
}

/** Runs `churnEndpoints` every `everyMs` until stopped. */
export function keepChurning(sql: Sql, humanId: string, everyMs = 600): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await churnEndpoints(sql, humanId);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}
