/**
 * A client's live readers: followers of a queue's events and waits for a message's outcome, each ended when
 * the client closes (or by the caller's own signal).
 */
import type { StoredEvent } from '../model/events.js';
import type { Store } from '../stores/contract/contract.js';

export interface Follower {
  /** Aborted when the client closes, or by the caller's signal. */
  readonly signal: AbortSignal;
  /** The follower has ended: the client no longer ends it. */
  readonly done: () => void;
}

export class Followers {
  private readonly live = new Set<AbortController>();

  start(signal: AbortSignal | undefined): Follower {
    const stop = new AbortController();
    this.live.add(stop);
    return {
      signal: signal === undefined ? stop.signal : AbortSignal.any([stop.signal, signal]),
      done: () => this.live.delete(stop),
    };
  }

  endAll(reason: Error): void {
    for (const follower of this.live) follower.abort(reason);
  }
}

/**
 * The queue's events from `after` ('now': written after this call, 'start': the oldest kept, or a cursor), read
 * while the follower lasts.
 */
export function followQueue(
  store: Store,
  queue: string,
  after: string,
  follower: Follower,
): AsyncIterable<StoredEvent> {
  const start =
    after === 'start' ? Promise.resolve(null) : after === 'now' ? store.eventsHead(queue) : Promise.resolve(after);
  // The head is read now, so 'now' means this call; a failure is reported when the loop starts.
  start.catch(() => undefined);
  return follow(store, queue, start, follower);
}

/** The events' reading module, loaded once the loop starts. */
async function* follow(
  store: Store,
  queue: string,
  start: Promise<string | null>,
  follower: Follower,
): AsyncGenerator<StoredEvent> {
  const { followEvents } = await import('../events/follow.js');
  yield* followEvents(store, queue, start, follower.signal, follower.done);
}
