/**
 * Waits for `work` at most `ms`: 'done' when it settled in time, 'timeout' when it did not (it is
 * left running), or the error it failed with. For shutdown steps that must not hang on a dead
 * database or socket.
 */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<'done' | 'timeout' | Error> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(resolve, ms, 'timeout');
    timer.unref();
  });
  try {
    return await Promise.race([work.then(() => 'done' as const), gaveUp]);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  } finally {
    clearTimeout(timer);
  }
}
