/**
 * What the server sends the browser script as JSON: shared by both sides (the browser's build imports only
 * these types, never the server's modules).
 */

/** A queue's counts, as a live update carries them. */
export interface LiveQueue {
  readonly queue: string;
  readonly counts: Readonly<Record<string, number>>;
  readonly total: number;
  readonly paused: boolean;
  readonly consumers: number;
}

/** A queue's last hour, per minute (chart.json). */
export type ChartData =
  | { readonly events: false }
  | {
      readonly events: true;
      /** Start of each minute, ms since the epoch, oldest first. */
      readonly minutes: readonly number[];
      readonly completed: readonly number[];
      readonly failed: readonly number[];
      /** failed / (completed + failed) per minute, null in a minute with neither. */
      readonly failureRate: readonly (number | null)[];
      /** Events older than the oldest kept were trimmed: the first minutes may be short. */
      readonly partial: boolean;
    };
