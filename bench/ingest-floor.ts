/**
 * The floor for webhook ingest (issue 20): a fastify route that does only what any GitHub webhook
 * receiver must, on the same stack as Switchboard: read the raw body, verify X-Hub-Signature-256
 * (HMAC-SHA256, timing-safe compare), and store the raw body with its delivery id as one row in
 * one statement, then answer 202. The delivery id is the table's primary key (a redelivery is not
 * stored twice, as a receiver must ensure), so the row carries one index. Its pool is the size of
 * the app's (POOL_MAX) on the same cluster.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import Fastify from 'fastify';
import { connect, POOL_MAX } from '../src/db/connect.ts';

export interface IngestFloor {
  url: string;
  /** Rows stored so far: every 202 must have made one. */
  rows(): Promise<number>;
  stop(): Promise<void>;
}

const BODY_LIMIT = 5 * 1024 * 1024;

export async function startIngestFloor(databaseUrl: string, secret: string): Promise<IngestFloor> {
  const sql = connect(databaseUrl, { max: POOL_MAX, applicationName: 'bench-ingest-floor' });
  await sql`
    create table if not exists bench_ingest_floor (
      delivery_id text primary key,
      body bytea not null,
      received_at timestamptz not null default now()
    )`;
  const app = Fastify({ logger: false, bodyLimit: BODY_LIMIT });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.post('/floor', async (req, reply) => {
    const body = req.body as Buffer;
    const given = req.headers['x-hub-signature-256'];
    const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
    if (typeof given !== 'string' || given.length !== expected.length || !timingSafeEqual(Buffer.from(given), expected)) {
      return reply.code(401).send();
    }
    const delivery = req.headers['x-github-delivery'];
    if (typeof delivery !== 'string' || delivery === '') return reply.code(400).send();
    await sql`insert into bench_ingest_floor (delivery_id, body) values (${delivery}, ${body}) on conflict (delivery_id) do nothing`;
    return reply.code(202).send();
  });
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url: `${address}/floor`,
    rows: async () => (await sql`select count(*)::int as n from bench_ingest_floor`)[0]!.n as number,
    stop: async () => {
      await app.close();
      await sql.end({ timeout: 5 });
    },
  };
}
