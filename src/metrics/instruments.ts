/**
 * What a worker tells an attached observer (the metrics of `client.metrics()`), at claim, handler end, finish
 * and renewal. A worker has none by default: each call site is one null check, so a worker nobody measures
 * pays nothing else (not even a clock read).
 */
import type { Outcome } from '../model/types.js';

/** Store calls a worker makes, as `storeError` names them. */
export type WorkerStoreOperation = 'claim' | 'finish' | 'renew' | 'maintenance';

/** What became of a handled message: the outcome the store kept, or `lost` when it was no longer the worker's. */
export type HandledOutcome = Outcome | 'lost';

export interface WorkerInstruments {
  /** A claim round trip took `seconds` and brought `count` messages. */
  claimed(queue: string, seconds: number, count: number): void;
  /** An enqueue claimed `count` messages for this worker while it waited (Store.receiveHandoffs). */
  handedOff(queue: string, count: number): void;
  /** A handler returned (or timed out) after `seconds`. */
  handlerEnded(queue: string, seconds: number): void;
  /** A batch of finishes reached the store in `seconds`. */
  finished(queue: string, seconds: number): void;
  /** One message's fate, once known. */
  handled(queue: string, outcome: HandledOutcome): void;
  /** A renewal extended `count` locks. */
  renewed(queue: string, count: number): void;
  /** A renewal found a lock this worker held gone. */
  lockLost(queue: string): void;
  /** A store call failed (the worker backs off and goes on). */
  storeError(queue: string, operation: WorkerStoreOperation): void;
}
