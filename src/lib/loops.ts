import type { Logger } from './log.ts';

/**
 * Runs `tick` every `intervalMs` until the signal aborts. A tick that throws is logged and the
 * loop carries on; ticks never overlap. The interval is wall-clock pacing only: what a tick does
 * depends on the injected Clock, not on when it runs.
 */
export function runEvery(
  name: string,
  intervalMs: number,
  tick: () => Promise<unknown>,
  opts: { signal: AbortSignal; log: Logger; runNow?: boolean },
): Promise<void> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let running: Promise<unknown> = Promise.resolve();
    const schedule = (delay: number) => {
      if (opts.signal.aborted) return;
      timer = setTimeout(() => {
        running = tick()
          .catch((err: unknown) => opts.log.error({ loop: name, err: (err as Error).message }, 'background loop tick failed'))
          .finally(() => schedule(intervalMs));
      }, delay);
      timer.unref?.();
    };
    opts.signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        void running.then(() => resolve());
      },
      { once: true },
    );
    schedule(opts.runNow ? 0 : intervalMs);
  });
}
