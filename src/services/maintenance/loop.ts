/** A background loop: `tick` runs every `intervalMs` on every instance until shutdown (lib/loops.ts runEvery). */
export interface MaintenanceLoop {
  name: string;
  intervalMs: number;
  /** Run the first tick at start instead of one interval later. */
  runNow?: boolean;
  tick(): Promise<unknown>;
}
