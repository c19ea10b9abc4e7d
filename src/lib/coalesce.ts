/**
 * Runs `task` once after calls stop arriving for `quietMs`, never twice at once: calls during a
 * run schedule exactly one more run after it. For catch-up work that many triggers ask for at
 * once (every LISTEN channel re-subscribing after a reconnect, each failed attempt included).
 */
export class Coalesced {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;

  constructor(
    private readonly task: () => Promise<void>,
    private readonly quietMs: number,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  request(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#run(), this.quietMs);
    this.#timer.unref();
  }

  /** Drops a pending run (shutdown). A run in progress finishes. */
  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#again = false;
  }

  #run(): void {
    this.#timer = undefined;
    this.#running = this.task()
      .catch(this.onError)
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.request();
        }
      });
  }
}
