/**
 * The types the dispatcher shares with its parts (events, load, mirror,
 * plan) and its hosts: a leaf, so the parts need not import dispatcher.ts,
 * which imports them.
 */
import type { Kv, RangeResult, WatchEvent } from '../kv.js';
import type { QueueKeys } from '../keys.js';
import type { Change } from '../txn-batch.js';

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
}

/** A change in a Txn: what to do once etcd answered. */
export interface Planned extends Change {
  onOk(revision: number): void;
  onFail(reads: readonly RangeResult[]): void;
  /** The Txn did not answer (error): undo what planning reserved. */
  onError(): void;
}
