import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { REQUEST_TIMEOUT_MS } from '../server.ts';
import { withApp } from '../../test/support/fixtures.ts';

/**
 * An anonymous sender must not make the server read (and buffer) a body it will refuse: the
 * per-IP limit and the token are checked when the headers arrive. Each request here declares a
 * 5 MB body and never sends it; the answer must come anyway.
 */
const fixture = withApp({ ingestLimit: { rate: 0.001, burst: 2 } });

/** Sends only the head of a POST that promises `length` bytes; resolves with the status line and headers. */
function headOnly(url: string, path: string, length: number): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let got = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer before the body to ${path}: the server is waiting for ${length} bytes`));
    }, 3000);
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        clearTimeout(timer);
        socket.destroy();
        resolve(got.slice(0, got.indexOf('\r\n\r\n')));
      }
    });
    socket.on('error', reject);
    socket.write(`POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`);
  });
}

describe('POST /webhooks/w/{token} before the body', () => {
  it('answers an unknown token 404 without waiting for the body, and closes the connection', async () => {
    const head = await headOnly(fixture.app.url, '/webhooks/w/not-a-token', 5_000_000);
    expect(head).toMatch(/^HTTP\/1\.1 404 /);
    expect(head.toLowerCase()).toContain('connection: close');
  });

  it('answers 429 from the per-IP limit without waiting for the body', async () => {
    // The burst of 2 is spent by the first test's request and this one; the next is refused.
    await headOnly(fixture.app.url, '/webhooks/w/still-not-a-token', 5_000_000);
    const head = await headOnly(fixture.app.url, '/webhooks/w/not-a-token-either', 5_000_000);
    expect(head).toMatch(/^HTTP\/1\.1 429 /);
    expect(head.toLowerCase()).toMatch(/retry-after: \d+/);
  });

  it('gives every request a deadline to arrive whole', () => {
    expect(fixture.app.server.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    expect(REQUEST_TIMEOUT_MS).toBeGreaterThan(0);
  });
});
