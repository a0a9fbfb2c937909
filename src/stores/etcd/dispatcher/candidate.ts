/**
 * Runs for one queue's dispatcher: puts the election key `/queue/{q}` (value:
 * this node's id) on the session lease if nobody holds it, dispatches while
 * it does, and otherwise waits for the key to go (its holder's lease ends)
 * and tries again. The key's create revision is the dispatcher's term: every
 * Txn it makes compares it.
 */
import { Dispatcher } from './dispatcher.js';
import type { DispatcherDeps } from './types.js';

// Looks at the election key this often even without a watch event, in case one was missed.
const RECHECK_MS = 10_000;
const RETRY_AFTER_ERROR_MS = 1000;
// A dispatcher that stalled stays out of the election this long (at most its stall time), for another to win.
const STAND_ASIDE_MS = 5000;

export interface CandidateDeps extends DispatcherDeps {
  readonly nodeId: string;
}

export class Candidate {
  private stopped = false;
  private dispatcher: Dispatcher | null = null;
  private wake: (() => void) | null = null;
  private readonly loop: Promise<void>;

  constructor(private readonly deps: CandidateDeps) {
    this.loop = this.run();
  }

  private isStopped(): boolean {
    return this.stopped;
  }

  /** True while this process dispatches the queue. */
  get dispatching(): boolean {
    return this.dispatcher?.running === true;
  }

  get current(): Dispatcher | null {
    return this.dispatcher;
  }

  private async run(): Promise<void> {
    const { kv, keys, log, nodeId } = this.deps;
    while (!this.stopped) {
      try {
        const lease = await kv.session.leaseId();
        if (this.isStopped()) break;
        const res = await kv.txn({
          compare: [{ key: keys.election, target: 'create', result: '=', operand: 0 }],
          success: [{ type: 'put', key: keys.election, value: Buffer.from(nodeId), lease }],
          failure: [{ type: 'range', key: keys.election }],
        });
        const holder = res.succeeded ? null : res.responses[0]?.type === 'range' ? res.responses[0].kvs[0] : undefined;
        let term: number | null = null;
        if (res.succeeded) term = res.revision;
        else if (holder?.lease === lease) term = holder.createRevision; // ours already (a restart of the loop)
        if (term !== null) {
          await this.dispatch(term);
          continue;
        }
        await this.waitForVacancy(res.revision + 1);
      } catch (error) {
        if (this.isStopped()) break;
        log(
          'warn',
          `campaign for ${keys.queue} failed (${error instanceof Error ? error.message : String(error)}); retrying`,
        );
        await this.pause(RETRY_AFTER_ERROR_MS);
      }
    }
  }

  private async dispatch(term: number): Promise<void> {
    const { log, keys } = this.deps;
    const dispatcher = new Dispatcher(this.deps, term);
    this.dispatcher = dispatcher;
    log('info', `dispatching ${keys.queue} (term ${term})`);
    // A start that never returns (its read hangs) ends when the dispatcher stops for making no progress.
    await Promise.race([
      dispatcher.start().catch((error: unknown) => {
        dispatcher.stop(`could not read the queue: ${error instanceof Error ? error.message : String(error)}`);
      }),
      dispatcher.stoppedWith,
    ]);
    const reason = await dispatcher.stoppedWith;
    if (!this.stopped) log('info', `stopped dispatching ${keys.queue}: ${reason}`);
    // Resign, so another node takes over at once; the compare leaves a key that is no longer ours alone.
    await this.deps.kv
      .txn({
        compare: [{ key: keys.election, target: 'create', result: '=', operand: term }],
        success: [{ type: 'delete', key: keys.election }],
      })
      .catch((error: unknown) => {
        if (dispatcher.stalled) {
          log('warn', `could not resign ${keys.queue} (${String(error)}): it goes when this process's lease ends`);
        }
      });
    if (!this.stopped) await this.pause(dispatcher.stalled ? Math.min(this.deps.stallMs, STAND_ASIDE_MS) : 100);
  }

  private async waitForVacancy(from: number): Promise<void> {
    const { kv, keys } = this.deps;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        void watch.cancel();
        this.wake = null;
        resolve();
      };
      const watch = kv.watch(
        { key: keys.election, startRevision: from },
        {
          events: (events) => {
            if (events.some((e) => e.type === 'delete')) done();
          },
          broken: () => done(),
        },
      );
      const timer = setTimeout(done, RECHECK_MS);
      this.wake = done;
    });
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      this.wake = done;
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
    });
  }

  /** Stops dispatching (resigning the key) and campaigning. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.wake?.();
    const dispatcher = this.dispatcher;
    if (dispatcher !== null) {
      dispatcher.stop('stopped');
    }
    await this.loop;
  }
}
