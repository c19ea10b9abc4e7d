import type { Sql, TxSql } from '../db/connect.ts';

/**
 * The cross-instance NOTIFY channels and their payloads. Each channel has one encode and one
 * decode here; the wire formats are shared with every instance of this version, so they must
 * not change: `todo_ready` and `todo_claimable` `<endpoint_id>:<queue>`, `endpoint_presence` `<endpoint_id>:<in|out|refresh>`,
 * `endpoint_revoked` `<endpoint_id>`, `doorbell_test` `<test id>`, `mcp_session` `<session id>:closed` or
 * `<session id>:stream:<instance id>`, `mcp_cancel` `<session id>:<JSON-RPC request id as JSON>`,
 * `listen_probe` `<nonce>`, `webhook_changed` `<webhook id>`, `notify_hooks_changed` `<endpoint id>`,
 * `oauth_grant_revoked` `<grant id>`.
 * Sent at commit, like any NOTIFY.
 */
export interface ChannelPayloads {
  /** Todos of this endpoint and queue became ready: ring them, and a claim may succeed. */
  todo_ready: { endpointId: string; queue: string };
  /** A claim may succeed, nothing to ring (a release): long-polling claims look again. */
  todo_claimable: { endpointId: string; queue: string };
  /** in/out: a claimed presence transition; refresh: an override or shift was written, re-read it. */
  endpoint_presence: { endpointId: string; change: 'in' | 'out' | 'refresh' };
  endpoint_revoked: { endpointId: string };
  doorbell_test: { testId: string };
  /** closed: the session ended everywhere; stream: its stream is now on that instance (any other ends its own). */
  mcp_session: { sessionId: string; change: 'closed' } | { sessionId: string; change: 'stream'; instanceId: string };
  /** A client cancelled a call (notifications/cancelled) on an instance not answering it. */
  mcp_cancel: { sessionId: string; requestId: string | number };
  /** /readyz proving this instance's LISTEN connection: a random nonce it expects back. */
  listen_probe: { nonce: string };
  /** A webhook was rotated or deleted: forget its cached ingest target (its old token must stop). */
  webhook_changed: { webhookId: string };
  /** An endpoint gained an enabled notify hook (created, or re-enabled by a rotation). */
  notify_hooks_changed: { endpointId: string };
  /** An OAuth grant was revoked: sessions whose last request carried one of its tokens end. */
  oauth_grant_revoked: { grantId: string };
}
export type Channel = keyof ChannelPayloads;

interface Codec<P> {
  encode(payload: P): string;
  /** null for a payload this version does not understand. */
  decode(raw: string): P | null;
}

const PRESENCE_CHANGES = ['in', 'out', 'refresh'] as const;

const endpointQueue: Codec<{ endpointId: string; queue: string }> = {
  encode: (p) => `${p.endpointId}:${p.queue}`,
  // Queue names never hold a colon, but split on the first anyway.
  decode: (raw) => {
    const cut = raw.indexOf(':');
    return cut < 0 ? null : { endpointId: raw.slice(0, cut), queue: raw.slice(cut + 1) };
  },
};

const codecs: { [C in Channel]: Codec<ChannelPayloads[C]> } = {
  todo_ready: endpointQueue,
  todo_claimable: endpointQueue,
  endpoint_presence: {
    encode: (p) => `${p.endpointId}:${p.change}`,
    decode: (raw) => {
      const cut = raw.lastIndexOf(':');
      const change = raw.slice(cut + 1) as ChannelPayloads['endpoint_presence']['change'];
      return cut < 0 || !PRESENCE_CHANGES.includes(change) ? null : { endpointId: raw.slice(0, cut), change };
    },
  },
  endpoint_revoked: {
    encode: (p) => p.endpointId,
    decode: (raw) => (raw ? { endpointId: raw } : null),
  },
  doorbell_test: {
    encode: (p) => p.testId,
    decode: (raw) => (raw ? { testId: raw } : null),
  },
  mcp_session: {
    encode: (p) => (p.change === 'closed' ? `${p.sessionId}:closed` : `${p.sessionId}:stream:${p.instanceId}`),
    decode: (raw) => {
      const [sessionId, change, instanceId, ...rest] = raw.split(':');
      if (!sessionId || rest.length > 0) return null;
      if (change === 'closed' && instanceId === undefined) return { sessionId, change };
      if (change === 'stream' && instanceId) return { sessionId, change, instanceId };
      return null;
    },
  },
  mcp_cancel: {
    encode: (p) => `${p.sessionId}:${JSON.stringify(p.requestId)}`,
    // Session ids hold no colon; the request id is JSON, which may.
    decode: (raw) => {
      const cut = raw.indexOf(':');
      if (cut <= 0) return null;
      try {
        const requestId: unknown = JSON.parse(raw.slice(cut + 1));
        return typeof requestId === 'string' || (typeof requestId === 'number' && Number.isFinite(requestId)) ? { sessionId: raw.slice(0, cut), requestId } : null;
      } catch {
        return null;
      }
    },
  },
  webhook_changed: {
    encode: (p) => p.webhookId,
    decode: (raw) => (raw ? { webhookId: raw } : null),
  },
  notify_hooks_changed: {
    encode: (p) => p.endpointId,
    decode: (raw) => (raw ? { endpointId: raw } : null),
  },
  oauth_grant_revoked: {
    encode: (p) => p.grantId,
    decode: (raw) => (raw ? { grantId: raw } : null),
  },
  listen_probe: {
    encode: (p) => p.nonce,
    decode: (raw) => (/^[0-9a-f]{32}$/.test(raw) ? { nonce: raw } : null),
  },
};

export const CHANNELS = Object.keys(codecs) as Channel[];

export function encodePayload<C extends Channel>(channel: C, payload: ChannelPayloads[C]): string {
  return (codecs[channel] as Codec<ChannelPayloads[C]>).encode(payload);
}

export function decodePayload<C extends Channel>(channel: C, raw: string): ChannelPayloads[C] | null {
  return (codecs[channel] as Codec<ChannelPayloads[C]>).decode(raw);
}

/** The pg_notify call as an expression, for a statement that notifies alongside its own work. */
export const notifyExpression = <C extends Channel>(sql: Sql | TxSql, channel: C, payload: ChannelPayloads[C]) =>
  notifyEncoded(sql, channel, encodePayload(channel, payload));

/** notifyExpression with its payload already encoded (encodePayload), or an `arg` of a compiled statement. */
export const notifyEncoded = (sql: Sql | TxSql, channel: Channel, encoded: string) => sql`pg_notify(${channel}, ${encoded}::text)`;

/**
 * `endpoint_presence` for every row of a statement, encoded in SQL from the row's columns (the
 * same `<endpoint_id>:<in|out>` as encodePayload): a transition and its broadcast in one statement.
 */
export const presenceNotifyPerRow = (sql: Sql | TxSql, endpointIdColumn: string, changeColumn: string) =>
  sql`pg_notify(${'endpoint_presence' satisfies Channel}, ${sql(endpointIdColumn)}::text || ':' || ${sql(changeColumn)})`;

/** `todo_ready` for every row of a statement, from its endpoint and queue columns (the same encoding as encodePayload). */
export const todoReadyNotifyPerRow = (sql: Sql | TxSql, endpointIdColumn: string, queueColumn: string) =>
  sql`pg_notify(${'todo_ready' satisfies Channel}, ${sql(endpointIdColumn)}::text || ':' || ${sql(queueColumn)})`;

/** `mcp_session` `<id>:closed` for every row of a statement (the same encoding as encodePayload). */
export const sessionClosedNotifyPerRow = (sql: Sql | TxSql, idColumn: string) =>
  sql`pg_notify(${'mcp_session' satisfies Channel}, ${sql(idColumn)} || ':closed')`;

/** Sends one notification; delivered to every instance when the surrounding transaction commits. */
export async function notify<C extends Channel>(sql: Sql | TxSql, channel: C, payload: ChannelPayloads[C]): Promise<void> {
  await sql`select ${notifyExpression(sql, channel, payload)}`;
}
