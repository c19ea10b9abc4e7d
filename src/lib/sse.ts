import type { ServerResponse } from 'node:http';

/** How often an idle event stream gets a comment line, so proxies and clients keep it open. */
export const SSE_KEEPALIVE_MS = 15_000;

/** Starts a text/event-stream response: the headers every stream needs, plus the caller's own. */
export function writeEventStreamHead(res: ServerResponse, extra: Record<string, string> = {}): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    // nginx would otherwise buffer the stream.
    'x-accel-buffering': 'no',
    'x-content-type-options': 'nosniff',
    ...extra,
  });
}

/**
 * The one keepalive of every event stream (MCP notification streams, the board's live updates):
 * a comment every `intervalMs`, only while the stream is open and its buffer empty. The caller
 * clears the timer on close.
 */
export function startKeepalive(res: ServerResponse, intervalMs: number = SSE_KEEPALIVE_MS): NodeJS.Timeout {
  const timer = setInterval(() => {
    // A stream with bytes still unflushed is not idle, and a never-reading client must not grow it.
    if (!res.destroyed && !res.writableEnded && res.writableLength === 0) res.write(': keepalive\n\n');
  }, intervalMs);
  timer.unref();
  return timer;
}
