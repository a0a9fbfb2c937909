/**
 * The types the dispatcher shares with its parts (events, load, mirror,
 * plan) and its hosts: a leaf, so the parts need not import dispatcher.ts,
 * which imports them.
 */
import type { Kv, RangeResult, WatchEvent } from '../kv.js';
import type { QueueKeys } from '../keys.js';
import type { Change } from '../txn-batch.js';

/**
 * A dispatcher that has had store calls under way or failing this long with none answered resigns, so another
 * process takes the queue over: four times the deadline of an etcd call (15 s, etcd3-kv.ts).
 */
export const DEFAULT_STALL_MS = 60_000;

export type DispatcherLog = (level: 'info' | 'warn' | 'error', message: string) => void;

/**
 * Told of a delivery as soon as its Txn succeeded: a consumer in the same
 * process takes it without waiting for its watch (which still delivers it;
 * the consumer sees the same revision twice).
 */
export type DeliveryListener = (consumerKey: string, delivery: WatchEvent) => void;

export interface DispatcherDeps {
  readonly kv: Kv;
  readonly keys: QueueKeys;
  readonly log: DispatcherLog;
  readonly onDelivery?: DeliveryListener | undefined;
  /** How long without progress on waiting work before the dispatcher resigns (DEFAULT_STALL_MS). */
  readonly stallMs: number;
}

/** A change in a Txn: what to do once etcd answered. */
export interface Planned extends Change {
  onOk(revision: number): void;
  onFail(reads: readonly RangeResult[]): void;
  /** The Txn did not answer (error): undo what planning reserved. */
  onError(): void;
}
