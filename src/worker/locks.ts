/**
 * The locks of the messages a worker holds: renewed every lockMs / 3 (with the consumer's registration), each
 * message given up shortly before its lock can end unrenewed (its fence), and cancels the store reports, which
 * fail a held message at once or keep one claimed later from running.
 */
import { hostname } from 'node:os';
import type { CanceledMessage, ClaimedMessage, Store } from '../stores/contract/contract.js';
import type { Announcer } from './announcer.js';
import type { Held } from './held.js';
import type { MonitorCalls } from './monitor-calls.js';
import type { WorkerView } from './view.js';

// A message is given up this long before its lock can end at the earliest (a timer fires late by a little).
const MAX_FENCE_MARGIN_MS = 250;
// Cancels of messages not held are remembered this many at most (a claim's answer arrives within moments).
const RECENT_CANCELS = 1000;

export class LockKeeper {
  /** How long before a lock's proven end the worker gives its message up. */
  private readonly fenceMarginMs: number;
  private renewTimer: NodeJS.Timeout | null = null;
  /** The renewal under way, if any; stop() waits for it, and renewals never overlap. */
  private renewing: Promise<void> | null = null;
  /** A cancel was heard while a renewal was on its way, which may have left before it: renew once more. */
  private renewAgain = false;
  /** One timer for the earliest fence of the held messages (see fence); null while none is armed. */
  private fenceTimer: NodeJS.Timeout | null = null;
  private fenceTimerAt = Infinity;
  /** Cancels heard for messages not held here (yet), id → attempt: one whose claim arrives later is not run. */
  private readonly recentCancels = new Map<string, number>();

  constructor(
    private readonly worker: WorkerView,
    private readonly store: Store,
    private readonly lockMs: number,
    private readonly held: ReadonlyMap<string, Held>,
    private readonly announcer: Announcer,
    private readonly monitor: MonitorCalls,
    /** Gives up a held message not started yet: reported lost and handed back. */
    private readonly unstarted: (held: Held, reason: Error) => void,
  ) {
    this.fenceMarginMs = Math.min(MAX_FENCE_MARGIN_MS, lockMs / 10);
  }

  /** Registers (or re-registers) the consumer, for lockMs. */
  async register(): Promise<void> {
    await this.store.registerConsumer(this.worker.queue, {
      id: this.worker.id,
      host: hostname(),
      pid: process.pid,
      ttlMs: this.lockMs,
    });
  }

  /** Renews every lockMs / 3 until stopRenewing. */
  startRenewing(): void {
    const renewEveryMs = Math.max(50, Math.floor(this.lockMs / 3));
    this.renewTimer = setInterval(() => {
      this.renewing ??= this.renew().finally(() => (this.renewing = null));
    }, renewEveryMs);
  }

  /** No more renewals; resolves once the one under way, if any, has ended. */
  stopRenewing(): Promise<void> | null {
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    return this.renewing;
  }

  /** Its cancel was heard before the claim's answer (another connection, a handoff on its way): never run. */
  wasCanceled(message: ClaimedMessage): boolean {
    return this.recentCancels.get(message.id) === message.attempt;
  }

  /** The fence of a message claimed by a request sent at `since` (a performance.now()). */
  fenceOf(since: number, message: ClaimedMessage): number {
    return since + message.lockLeftMs - this.fenceMarginMs;
  }

  /** Watches a newly held message's fence. */
  watch(fenceAt: number): void {
    // Claims come in order, so a later fence rarely needs the timer moved: one comparison on the hot path.
    const at = Math.min(fenceAt, this.sessionFence());
    if (at < this.fenceTimerAt) this.armFence(at);
  }

  disarmFence(): void {
    if (this.fenceTimer !== null) clearTimeout(this.fenceTimer);
    this.fenceTimer = null;
    this.fenceTimerAt = Infinity;
  }

  /**
   * The store says a held message was canceled (null: one may have been, and a renewal now finds which). It is
   * failed already: its handler is told to stop, and what it returns is not stored.
   */
  readonly canceled = (canceled: CanceledMessage | null): void => {
    if (canceled === null) {
      if (this.held.size > 0) this.renewNow();
      return;
    }
    const held = this.held.get(canceled.id);
    if (held === undefined) {
      this.recentCancels.set(canceled.id, canceled.attempt);
      if (this.recentCancels.size > RECENT_CANCELS)
        this.recentCancels.delete(this.recentCancels.keys().next().value as string);
      return;
    }
    if (held.attempt !== canceled.attempt || held.takenAway) return;
    this.announcer.canceled(held);
  };

  /** `afterCancel`: a store said a message may have been canceled; those found gone are looked up to tell which. */
  private async renew(afterCancel = false): Promise<void> {
    const { worker } = this;
    try {
      // A message given up is not renewed: its lock ends, and the store hands it to another worker.
      const held = [...this.held.values()].filter((h) => !h.takenAway);
      if (held.length > 0) {
        // Before the request leaves: the locks it extends end no sooner than lockMs after this.
        const sentAt = performance.now();
        const { lockMs } = this;
        const lost = await this.store.extend(worker.queue, worker.id, held, lockMs);
        worker.instruments?.renewed(worker.queue, held.length - lost.length);
        // Every lock moves; those reported lost are taken away below, so their fence no longer matters.
        const fenceAt = sentAt + lockMs - this.fenceMarginMs;
        for (const h of held) if (fenceAt > h.fenceAt) h.fenceAt = fenceAt;
        const sent = new Map(held.map((h) => [h.id, h]));
        for (const id of lost) {
          const held = sent.get(id);
          // Only the attempt the renewal was sent for: its finish may have been stored meanwhile and the next
          // attempt claimed here, which this answer says nothing of. A finishing message may be gone because
          // its finish was just stored: the finish's own result says.
          if (held === undefined || !this.holds(held)) continue;
          if (afterCancel) this.monitor.track(this.lostOrCanceled(held));
          else {
            worker.instruments?.lockLost(worker.queue);
            this.announcer.lost(held);
          }
        }
      }
      await this.register();
    } catch (error) {
      worker.instruments?.storeError(worker.queue, 'renew');
      this.announcer.reportError(error);
    }
  }

  /** Renews now, or once more after the renewal under way, which may have left before what asks for this. */
  private renewNow(): void {
    if (!this.worker.running) return;
    if (this.renewing !== null) {
      this.renewAgain = true;
      return;
    }
    this.renewing = this.renew(true).finally(() => {
      this.renewing = null;
      if (!this.renewAgain) return;
      this.renewAgain = false;
      this.renewNow();
    });
  }

  /** A held message a renewal found gone after a cancel hint: canceled if its status says so, else lost. */
  private async lostOrCanceled(held: Held): Promise<void> {
    const { worker } = this;
    const status = await this.store.status(worker.queue, held.id).catch(() => null);
    // Its finish may have left while the status was read: then that finish's result says what became of it.
    if (!this.holds(held)) return;
    if (status?.state === 'failed' && status.lastError?.startsWith('canceled') === true) {
      this.canceled({ id: held.id, attempt: held.attempt });
    } else {
      worker.instruments?.lockLost(worker.queue);
      this.announcer.lost(held);
    }
  }

  /** Whether `held` is still this worker's current attempt of its message, with no finish on its way. */
  private holds(held: Held): boolean {
    return this.held.get(held.id) === held && !held.finishing && !held.takenAway;
  }

  /** When the store's session that holds the claims may end, less the margin; Infinity for a store without. */
  private sessionFence(): number {
    return this.store.claimsHeldUntil === undefined ? Infinity : this.store.claimsHeldUntil() - this.fenceMarginMs;
  }

  /** Arms the fence timer for `at` (a performance.now()), unless it fires sooner already. */
  private armFence(at: number): void {
    if (this.fenceTimer !== null) clearTimeout(this.fenceTimer);
    this.fenceTimerAt = at;
    this.fenceTimer = setTimeout(this.fence, Math.max(0, at - performance.now()));
  }

  /**
   * The fence timer: every held message whose lock may end now, without a renewal acknowledged since, is given
   * up (its signal aborted, its late result not stored), as is every one when the store's session may have
   * ended. One timer for the worker, armed for the earliest fence: renewals move fences later without touching
   * it, and it looks again when it fires.
   */
  private readonly fence = (): void => {
    this.fenceTimer = null;
    this.fenceTimerAt = Infinity;
    const now = performance.now();
    const sessionFence = this.sessionFence();
    let next = Infinity;
    for (const held of this.held.values()) {
      // A finishing message's result is on its way: the store's answer says whether it held.
      if (!this.holds(held)) continue;
      const at = Math.min(held.fenceAt, sessionFence);
      if (at > now) next = Math.min(next, at);
      else {
        this.worker.instruments?.lockLost(this.worker.queue);
        const reason = at === held.fenceAt ? unrenewedError(held) : sessionEndedError();
        // A handler that runs is told to stop; its message is left to its lock's end, which is what the margin
        // before that end is for. One not started yet goes back at once.
        if (held.startedAt === 0) this.unstarted(held, reason);
        else this.announcer.lost(held, reason);
      }
    }
    if (next < Infinity) this.armFence(next);
  };
}

function unrenewedError(held: Held): Error {
  return new Error(`lock lost: the lock of ${held.id} (attempt ${held.attempt}) ended without an acknowledged renewal`);
}

function sessionEndedError(): Error {
  return new Error('lock lost: the store session holding the lock may have ended');
}
