/**
 * The pinned session's stand-in behind a pooler in transaction mode (URL option `pooler=transaction`), where
 * a connection's session state is not the client's: a LISTEN would hear nothing reliably, and a session
 * advisory lock would stay with a server connection the pooler keeps (and hands to others) after the process
 * died. So nothing is pinned: subscribers are called every POLL_MS instead of on a NOTIFY, no consumer lock is
 * taken (consumers register with NO_LOCK, which claims never sweep), and claims end with their locks alone.
 */
import type { Session } from './session.js';

const POLL_MS = 1000;

/** The consumer lock key of a consumer that holds none: release.ts skips it, so its messages end with their locks. */
export const NO_LOCK = 0;

/** What the store uses of its session, pinned (session.ts) or not (this file). */
export type StoreSession = Pick<
  Session,
  'subscribe' | 'hold' | 'release' | 'heldUntil' | 'lostFor' | 'lockSpace' | 'close'
>;

export class PollingSession implements StoreSession {
  readonly lockSpace = 0;
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;

  subscribe(_payload: string, listener: () => void): () => void {
    this.listeners.add(listener);
    this.timer ??= setInterval(() => {
      for (const call of this.listeners) call();
    }, POLL_MS);
    this.timer.unref();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size > 0 || this.timer === null) return;
      clearInterval(this.timer);
      this.timer = null;
    };
  }

  hold(): Promise<void> {
    return Promise.resolve();
  }

  release(): Promise<void> {
    return Promise.resolve();
  }

  /** No session holds the claims: they end with their locks, as the worker's renewals prove them. */
  heldUntil(): number {
    return Infinity;
  }

  lostFor(): number {
    return 0;
  }

  close(): Promise<void> {
    this.listeners.clear();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    return Promise.resolve();
  }
}
