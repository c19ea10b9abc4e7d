import { createServer } from 'node:net';

/**
 * Whether `host:port` can be bound now: null when it can, else the bind error (EADDRINUSE,
 * EACCES, EADDRNOTAVAIL...). Run before slow start-up work so a taken port is reported first; the
 * address is released again at once, so another process may still take it before the real bind.
 */
export async function probeListen(host: string, port: number): Promise<NodeJS.ErrnoException | null> {
  const probe = createServer();
  return new Promise((resolve) => {
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(null)));
  });
}

/** A bind error as a sentence naming the address and what usually causes it. */
export function describeBindError(host: string, port: number, err: NodeJS.ErrnoException): string {
  const at = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch (err.code) {
    case 'EADDRINUSE':
      return `${at} is already in use by another process: stop it or choose another port`;
    case 'EACCES':
      return `${at} may not be bound by this user (ports below 1024 need privileges)`;
    case 'EADDRNOTAVAIL':
      return `${at} is not an address of this machine`;
    default:
      return `${at} cannot be bound: ${err.message}`;
  }
}
