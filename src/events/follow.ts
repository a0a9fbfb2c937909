/**
 * Following a queue's events live: pages read from the store, and between them a wait on the store's own
 * notification (subscribeEvents), with a slow poll in case a notification is lost.
 */
import { EventsMissedError } from '../model/errors.js';
import { Doorbell } from './doorbell.js';
import { publicEvent, type StoredEvent } from '../model/events.js';
import type { Store } from '../stores/contract/contract.js';

const PAGE_SIZE = 500;
// A safety net only: the store's notification is what wakes a reader in time.
const FALLBACK_POLL_MS = 2000;

/**
 * Yields the queue's events after `start` (null: from the oldest kept) until `signal` aborts. A gap (events
 * trimmed unread) throws EventsMissedError. A store failure after the abort (a client closed under the
 * reader) ends the iteration quietly.
 */
export async function* followEvents(
  store: Store,
  queue: string,
  start: Promise<string | null>,
  signal: AbortSignal,
  done: () => void,
): AsyncGenerator<StoredEvent, void, undefined> {
  const bell = new Doorbell();
  const unsubscribe = store.subscribeEvents(queue, bell.ring);
  try {
    let cursor = await start;
    while (!signal.aborted) {
      const page = await store.readEvents(queue, cursor, PAGE_SIZE);
      if (stopped(signal)) return;
      if (page.missed) throw new EventsMissedError(queue, page.events.map(publicEvent), page.cursor);
      cursor = page.cursor;
      for (const event of page.events) {
        yield publicEvent(event);
        if (stopped(signal)) return;
      }
      if (page.events.length < PAGE_SIZE) await bell.wait(FALLBACK_POLL_MS, signal);
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  } finally {
    unsubscribe();
    done();
  }
}

/** Read through a call, since an abort can come while the loop awaits (the compiler cannot see that). */
function stopped(signal: AbortSignal): boolean {
  return signal.aborted;
}
