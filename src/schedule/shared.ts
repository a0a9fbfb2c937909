/**
 * One scheduler per client and queue, however many of the client's workers fire schedules: each would
 * otherwise read the queue's schedules every rescan, N workers N times. Reference-counted: the first worker
 * that joins starts the loop, the last one to leave stops it.
 */
import { Scheduler } from './scheduler.js';
import type { Store } from '../stores/contract/contract.js';

/** A joined worker; its own token, so the same error callback may join twice. */
interface Member {
  readonly onError: (error: unknown) => void;
}

interface Running {
  readonly scheduler: Scheduler;
  readonly halt: AbortController;
  loop: Promise<void>;
  readonly members: Set<Member>;
  /** Who hears errors once every member left while the loop still finishes its last firing. */
  last: Member;
}

export class SharedSchedulers {
  private readonly running = new Map<string, Running>();

  constructor(private readonly store: Store) {}

  /**
   * Fires the queue's schedules until `signal` aborts, sharing the loop with the other members of `queue`.
   * Errors go to the longest-joined member still there. Resolves once this member left and, if it was the
   * last, the loop ended (a firing under way completes first).
   */
  join(queue: string, onError: (error: unknown) => void, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    const member: Member = { onError };
    const entry = this.running.get(queue) ?? this.start(queue, member);
    entry.members.add(member);
    return new Promise((resolve) => {
      signal.addEventListener('abort', () => resolve(this.leave(queue, entry, member)), { once: true });
    });
  }

  /** Reads the queue's schedules now rather than at the next rescan (one of them changed in this process). */
  wake(queue: string): void {
    this.running.get(queue)?.scheduler.wake();
  }

  /** Queues with a running loop. */
  get queues(): string[] {
    return [...this.running.keys()];
  }

  private start(queue: string, first: Member): Running {
    const halt = new AbortController();
    const report = (error: unknown): void => {
      const [member] = entry.members;
      (member ?? entry.last).onError(error);
    };
    const scheduler = new Scheduler(this.store, queue, report);
    const entry: Running = { scheduler, halt, loop: Promise.resolve(), members: new Set(), last: first };
    entry.loop = scheduler.run(halt.signal);
    this.running.set(queue, entry);
    return entry;
  }

  private async leave(queue: string, entry: Running, member: Member): Promise<void> {
    entry.members.delete(member);
    if (entry.members.size > 0) return;
    entry.last = member;
    entry.halt.abort();
    if (this.running.get(queue) === entry) this.running.delete(queue);
    await entry.loop;
  }
}
