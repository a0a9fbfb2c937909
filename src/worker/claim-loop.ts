/**
 * A worker's claims: one at a time, as slots free up, waiting between them for a wake-up from the store, a free
 * slot, or the queue's next ready time; and the messages an enqueue hands to a waiting worker (handoffs).
 */
import { sleep, setLongTimeout } from '../model/time.js';
import type { ClaimResult, ClaimedMessage, HandoffReceiver, Store } from '../stores/contract/contract.js';
import type { Handling } from './handling.js';
import type { MonitorCalls } from './monitor-calls.js';
import type { CheckedWorkerOptions } from './options.js';
import type { StoreHealth } from './store-health.js';
import type { WorkerView } from './view.js';

// Fewer slots than this never claim ahead: few messages a round trip leave little client work to overlap, and a
// worker of few slots is often one of many sharing a queue (messages claimed ahead are not theirs to take).
const MIN_OVERLAP_SLOTS = 8;

/** A claim on its way: its answer, performance.now() when it was sent, and how many messages it asked for. */
interface SentClaim {
  readonly claim: Promise<ClaimResult>;
  readonly sentAt: number;
  readonly max: number;
}

export class ClaimLoop {
  /** Which filter classes the worker takes (null: all), from the queue's configuration. */
  accepts: ((filterClass: string) => boolean) | null = null;
  /** Messages the store claims for this worker while it waits with free slots, where it does (accept-all only). */
  handoffs: HandoffReceiver | null = null;
  private woken = false;
  private wake: (() => void) | null = null;
  /** The loop waits for a slot (not for messages): a finish on its way or stored wakes it. */
  private full = false;
  /** The last claim came back empty while messages were held: the last of them to leave asks again. */
  private dryWhileHeld = false;
  /** The last answer left ready messages behind. */
  private backlog = false;
  /** Claims go out while finishes travel (see freeSlots). */
  private readonly claimWithFinishes: boolean;
  /** With a backlog and quick handlers, send the next claim as an answer arrives (see claimAhead). */
  private readonly overlap: boolean;

  constructor(
    private readonly worker: WorkerView,
    private readonly store: Store,
    private readonly options: CheckedWorkerOptions,
    private readonly handling: Handling,
    private readonly health: StoreHealth,
    private readonly monitor: MonitorCalls,
    private readonly reportError: (error: unknown) => void,
    /** Aborted by the first stop. */
    private readonly halt: AbortSignal,
  ) {
    this.claimWithFinishes = store.capabilities.claimWithFinishes;
    this.overlap =
      this.claimWithFinishes &&
      store.capabilities.overlapClaims &&
      options.throttleMs === 0 &&
      this.slots() >= MIN_OVERLAP_SLOTS;
  }

  /** Takes the messages the store hands over while the worker waits, where it does and the worker takes all. */
  receiveHandoffs(): void {
    if (this.accepts !== null || this.store.receiveHandoffs === undefined) return;
    this.handoffs = this.store.receiveHandoffs(this.worker.queue, this.worker.id, {
      delivered: (messages, size, since) => this.handed(messages, size, since),
      ready: () => this.kick(),
      failed: this.reportError,
    });
  }

  /**
   * The claim loop: one claim at a time, so the messages of one answer rank at or above the next's. Where the
   * store overlaps claims and the handlers return within a round trip, the next claim is sent as an answer with a
   * backlog arrives (`ahead`), before that answer's handlers start: the store works on it while they run and
   * while their finishes travel, instead of each side waiting for the other.
   */
  async run(): Promise<void> {
    const { handling, worker } = this;
    let ahead: SentClaim | null = null;
    while (worker.running) {
      let sent = ahead;
      ahead = null;
      if (sent === null) {
        const max = this.freeSlots();
        if (max <= 0) {
          this.woken = false;
          this.full = true;
          await this.idle(Infinity);
          this.full = false;
          continue;
        }
        this.woken = false;
        sent = this.claim(max);
      }
      let claimed: readonly ClaimedMessage[];
      let wakeAt: number | null;
      try {
        const result = await sent.claim;
        this.health.answered();
        ({ messages: claimed, wakeAt } = result);
        // The last answer's handlers have all returned before this one came: so will this one's, likely.
        const quick = this.backlog && handling.running === 0 && handling.waitingCount === 0;
        // An answer short of what was asked likely took the last ready messages (a trickle): one sent ahead would
        // come back empty, and an empty claim costs a store its dry-run bookkeeping.
        const full = claimed.length >= sent.max;
        this.dryWhileHeld = claimed.length === 0 && handling.held.size > 0;
        for (const message of claimed) handling.accept(message, sent.sentAt);
        // A claim that drained the queue says so with a wakeAt: the next claim would find nothing.
        this.backlog = claimed.length > 0 && wakeAt === null;
        if (this.overlap && this.backlog && quick && full) ahead = this.claimAhead(claimed.length);
        // Started before the monitor hears of them: a monitor that stops the worker stops what comes after.
        handling.startWaiting();
        this.monitor.report(result.queueSize, result.dryRuns, claimed, handling.held.size);
      } catch (error) {
        this.backlog = false;
        worker.instruments?.storeError(worker.queue, 'claim');
        await this.health.failed(error, this.halt);
        continue;
      }
      if (!this.backlog) await this.idle(wakeAt === null ? Infinity : wakeAt - Date.now());
      else if (this.options.throttleMs > 0) await sleep(this.options.throttleMs, this.halt);
    }
    // Stopped with a claim on its way: its messages wait, and the stop gives them back.
    if (ahead !== null) await this.acceptLate(ahead);
  }

  /** Wakes the loop: a wake-up from the store, a free slot, or a stop. */
  kick(): void {
    this.woken = true;
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** A batch of finishes leaves: their slots are free, and a loop waiting for one asks for more in this tick. */
  finishesLeaving(): void {
    if (this.full && this.claimWithFinishes) this.kick();
  }

  /** A message's handling has ended (its finish stored, or it was let go). */
  slotFreed(): void {
    // Without claimWithFinishes the slot frees only now (and ZooKeeper's finish claimed for this next claim).
    // After a dry claim, the last result stored asks once more, so a monitor sees a dry claim with nothing in
    // flight (the CLI's --idle-exit-ms waits for one) even when the wait is a rate limit's next slot.
    const lastAfterDry = this.dryWhileHeld && this.handling.held.size === 0;
    if (lastAfterDry) this.dryWhileHeld = false;
    // A worker that takes handoffs and waits for messages claims again: the claim parks the freed slot too.
    const parkAgain = this.handoffs !== null && !this.backlog;
    if (this.full || !this.claimWithFinishes || lastAfterDry || parkAgain) this.kick();
  }

  private claim(max: number): SentClaim {
    const { worker } = this;
    // Read once: metrics attached during the claim start with the next one, not with a clock never read.
    const instruments = worker.instruments;
    // Before the request leaves: the locks it takes count from no earlier than this.
    const sentAt = performance.now();
    const claim = this.store.claim(worker.queue, {
      consumerId: worker.id,
      max,
      lockMs: this.options.lockMs,
      accepts: this.accepts,
      eoqBackoffMs: (n) => this.options.eoqBackoffMs(Math.min(n, 5) - 1),
    });
    if (instruments === null) return { claim, sentAt, max };
    const measured = claim.then((result) => {
      instruments.claimed(worker.queue, (performance.now() - sentAt) / 1000, result.messages.length);
      return result;
    });
    return { claim: measured, sentAt, max };
  }

  /**
   * The next claim, sent before this answer's handlers start, for as many messages as it brought: their handlers
   * will have returned when it arrives (see `quick`), so its messages start on arrival. At most twice the slots
   * are held besides the messages whose finish is on its way. Null when none.
   */
  private claimAhead(answered: number): SentClaim | null {
    // An answer that came during a stop: its messages go back, and nothing more is claimed.
    if (!this.worker.running) return null;
    const { handling } = this;
    const max = Math.min(answered, 2 * this.slots() - (handling.held.size - handling.done));
    if (max <= 0) return null;
    this.woken = false;
    const sent = this.claim(max);
    // Awaited by the loop's next turn; marked handled should a store failure make that turn wait first.
    sent.claim.catch(() => undefined);
    return sent;
  }

  private async acceptLate({ claim, sentAt }: SentClaim): Promise<void> {
    try {
      for (const message of (await claim).messages) this.handling.accept(message, sentAt);
    } catch (error) {
      this.worker.instruments?.storeError(this.worker.queue, 'claim');
      this.reportError(error);
    }
  }

  /** Messages this worker holds at most (besides finishes on their way): a batch takes `size` of them. */
  private slots(): number {
    const { concurrency, prefetch, batch } = this.options;
    return concurrency * (batch?.size ?? 1) + prefetch;
  }

  /**
   * How many messages the next claim may take. A message whose handler returned no longer takes a slot, so the
   * next claim travels with the finishes; at most as many again wait on their finishes (a store that refuses
   * finishes stops the claims). A store without `claimWithFinishes` is asked once the finishes are stored.
   */
  private freeSlots(): number {
    const slots = this.slots();
    const { held, done } = this.handling;
    if (!this.claimWithFinishes) return slots - held.size;
    return Math.min(slots - (held.size - done), 2 * slots - held.size);
  }

  /** Messages an enqueue claimed for this worker while it waited: they start as a claim's would. */
  private handed(messages: readonly ClaimedMessage[], queueSize: number, since: number): void {
    this.worker.instruments?.handedOff(this.worker.queue, messages.length);
    for (const message of messages) this.handling.accept(message, since);
    this.handling.startWaiting();
    this.monitor.report(queueSize, 0, messages, this.handling.held.size);
  }

  /** The loop's wait: up to `ms`, or until a kick (including one that came during the last claim). */
  private idle(ms: number): Promise<void> {
    if (!this.worker.running || this.woken || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = Number.isFinite(ms) ? setLongTimeout(done, ms) : null;
      this.wake = done;
      function done(): void {
        timer?.clear();
        resolve();
      }
    });
  }
}
