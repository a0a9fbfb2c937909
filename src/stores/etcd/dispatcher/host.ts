/**
 * The dispatcher candidates of one process: a queue gets a candidate while
 * something in the process needs it dispatched (a consumer, a subscriber, or
 * an explicit `dispatch`), and resigns when nothing does.
 */
import { QueueKeys } from '../keys.js';
import { Candidate } from './candidate.js';
import type { Kv } from '../kv.js';
import { DEFAULT_STALL_MS, type DeliveryListener, type DispatcherLog } from './types.js';

export class DispatcherHost {
  private readonly candidates = new Map<string, { candidate: Candidate; holds: number }>();
  private closed = false;

  constructor(
    private readonly kv: Kv,
    private readonly root: string,
    readonly nodeId: string,
    private readonly log: DispatcherLog,
    /** Told of each delivery this process's dispatchers make, before its watch event arrives. */
    private readonly onDelivery?: DeliveryListener,
    /** How long a dispatcher here may make no progress on waiting work before it resigns. */
    private readonly stallMs = DEFAULT_STALL_MS,
  ) {}

  /** Keeps a candidate running for the queue until the returned release is called. */
  hold(queue: string): () => void {
    if (this.closed) return () => undefined;
    let entry = this.candidates.get(queue);
    if (entry === undefined) {
      const keys = new QueueKeys(this.root, queue);
      const { kv, log, nodeId, onDelivery, stallMs } = this;
      const deps = { kv, keys, log, nodeId, onDelivery, stallMs };
      entry = { candidate: new Candidate(deps), holds: 0 };
      this.candidates.set(queue, entry);
    }
    entry.holds += 1;
    const held = entry;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      held.holds -= 1;
      if (held.holds === 0 && this.candidates.get(queue) === held) {
        this.candidates.delete(queue);
        void held.candidate.stop();
      }
    };
  }

  dispatching(queue: string): boolean {
    return this.candidates.get(queue)?.candidate.dispatching === true;
  }

  describe(queue: string): string | null {
    return this.candidates.get(queue)?.candidate.current?.describe() ?? null;
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.candidates.values()];
    this.candidates.clear();
    await Promise.all(all.map((e) => e.candidate.stop()));
  }
}
