/** The context of one SQLite write transaction, and the failing row shape, shared by the store's operations. */
import type { Statements } from './statements.js';
import type { QueueEventType } from '../../model/events.js';
import type { QueueConfig } from '../../model/types.js';

/** The statements and context of one write transaction. */
export interface WriteContext {
  readonly sql: Statements;
  readonly queue: string;
  readonly now: number;
  /** The queue's configuration, read (once) inside the transaction. */
  readonly config: () => QueueConfig;
  /** Any queue's configuration, read once per transaction (a flow's messages may be in other queues). */
  readonly configOf: (queue: string) => QueueConfig;
  /** Wakes a queue's workers once the transaction has committed. */
  readonly wake: (queue: string) => void;
  /** Records a queue event in this transaction, if the queue (default: this one) has events on. */
  readonly event: (type: QueueEventType, id: string, attempt: number, error?: string | null, queue?: string) => void;
  /**
   * Adds to this queue's `size` and `done` counters at the transaction's end, in the statement that appends its
   * events when it has any (one write of the queue row, not two).
   */
  readonly count: (size: number, done: number) => void;
}

/** A locked message that fails, as the store read it. */
export interface FailingRow {
  readonly seq: number;
  readonly id: string;
  readonly filters: string;
  readonly attempt: number;
  /** 1 while a flow's parent waits for this message (flows.ts). */
  readonly parent_wait: number;
}
