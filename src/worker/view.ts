/**
 * What the worker's parts read of the worker itself: its identity, whether it runs, and its metrics, which the
 * client may attach at any time (so they are read where used, never copied).
 */
import type { WorkerInstruments } from '../metrics/instruments.js';

export interface WorkerView {
  readonly queue: string;
  /** The consumer id, as the registry shows it. */
  readonly id: string;
  readonly running: boolean;
  readonly instruments: WorkerInstruments | null;
}
