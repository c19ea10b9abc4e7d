/**
 * Every notify hook delivery carries this header (its value: the hook id). Ingest refuses any
 * delivery that carries it, so a hook pointed at a Switchboard ingest URL, this server's or
 * another's, cannot feed todos back into a queue and loop.
 */
export const NOTIFY_HOOK_MARKER = 'X-Switchboard-Notify-Hook';
