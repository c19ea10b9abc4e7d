import { describe, expect, it } from 'vitest';
import { TrackedCall } from './call-cancellations.ts';

// TrackedCall makes its AbortController only when a tool reads the signal: an end that comes
// first must still show on a signal read after it, and one that comes later must reach it.

describe('TrackedCall', () => {
  it('gives an already aborted signal when it was ended before anything read it', () => {
    const call = new TrackedCall(() => {});
    call.abort();
    expect(call.aborted).toBe(true);
    expect(call.signal.aborted).toBe(true);
  });

  it('aborts a signal read before the end, once, and keeps handing out that signal', () => {
    const call = new TrackedCall(() => {});
    const signal = call.signal;
    let heard = 0;
    signal.addEventListener('abort', () => heard++);
    expect(signal.aborted).toBe(false);
    call.abort();
    call.abort();
    expect(signal.aborted).toBe(true);
    expect(heard).toBe(1);
    expect(call.signal).toBe(signal);
  });

  it('runs its end without ending the call', () => {
    let ended = 0;
    const call = new TrackedCall(() => ended++);
    call.end();
    expect(ended).toBe(1);
    expect(call.aborted).toBe(false);
  });
});
