/**
 * One lane per consumer of a queue: its finishes and claims reach the server in the order the worker made them,
 * so a claim sees every finish sent before it (the store's `claimWithFinishes`). What waits while the lane is
 * busy goes together: every finish waiting and the first claim, one piece of work (a statement or a
 * transaction) per round trip. A claim also waits for the consumer's handler transactions being committed.
 */
import type { ClaimRequest, ClaimResult, Finish, FinishResult } from '../contract/contract.js';

/** One turn of a lane: the finishes (possibly none) and a claim (or null), done as one. */
export type LaneRunner = (
  queue: string,
  consumerId: string,
  finishes: readonly Finish[],
  claim: ClaimRequest | null,
) => Promise<{ results: FinishResult[]; claimed: ClaimResult | null }>;

interface Waiting<I, O> {
  readonly input: I;
  readonly resolve: (output: O) => void;
  readonly reject: (error: unknown) => void;
}

interface Lane {
  finishes: Waiting<readonly Finish[], FinishResult[]>[];
  claims: Waiting<ClaimRequest, ClaimResult>[];
  readonly commits: Set<Promise<unknown>>;
  busy: boolean;
}

export class ConsumerLanes {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly run: LaneRunner) {}

  finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]> {
    return new Promise((resolve, reject) => {
      const lane = this.lane(queue, consumerId);
      lane.finishes.push({ input: finishes, resolve, reject });
      this.start(queue, consumerId, lane);
    });
  }

  claim(queue: string, consumerId: string, request: ClaimRequest): Promise<ClaimResult> {
    return new Promise((resolve, reject) => {
      const lane = this.lane(queue, consumerId);
      lane.claims.push({ input: request, resolve, reject });
      this.start(queue, consumerId, lane);
    });
  }

  /** A handler transaction of the consumer is committing its finish: later claims wait for it. */
  committing(queue: string, consumerId: string, commit: Promise<unknown>): void {
    const lane = this.lane(queue, consumerId);
    const settled = commit.then(
      () => undefined,
      () => undefined,
    );
    lane.commits.add(settled);
    void settled.then(() => {
      lane.commits.delete(settled);
      this.forget(queue, consumerId, lane);
    });
  }

  private lane(queue: string, consumerId: string): Lane {
    const key = `${queue}\n${consumerId}`;
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = { finishes: [], claims: [], commits: new Set(), busy: false };
      this.lanes.set(key, lane);
    }
    return lane;
  }

  private forget(queue: string, consumerId: string, lane: Lane): void {
    if (lane.busy || lane.finishes.length > 0 || lane.claims.length > 0 || lane.commits.size > 0) return;
    const key = `${queue}\n${consumerId}`;
    if (this.lanes.get(key) === lane) this.lanes.delete(key);
  }

  /** Work made in the same tick goes together: the lane starts on the next turn of the event loop. */
  private start(queue: string, consumerId: string, lane: Lane): void {
    if (lane.busy) return;
    lane.busy = true;
    setImmediate(() => void this.drain(queue, consumerId, lane));
  }

  private async drain(queue: string, consumerId: string, lane: Lane): Promise<void> {
    while (lane.finishes.length > 0 || lane.claims.length > 0) {
      const finishes = lane.finishes;
      lane.finishes = [];
      const claim = lane.claims.shift() ?? null;
      if (claim !== null && lane.commits.size > 0) await Promise.all(lane.commits);
      try {
        const done = await this.run(
          queue,
          consumerId,
          finishes.flatMap((f) => f.input),
          claim?.input ?? null,
        );
        let at = 0;
        for (const f of finishes) {
          f.resolve(done.results.slice(at, at + f.input.length));
          at += f.input.length;
        }
        if (claim !== null) {
          if (done.claimed === null) claim.reject(new Error('kvmq: a claim went unanswered'));
          else claim.resolve(done.claimed);
        }
      } catch (error) {
        for (const f of finishes) f.reject(error);
        claim?.reject(error);
      }
      // The worker answers a claim with its next one: a turn of the event loop lets it join the finishes waiting.
      if (claim !== null && lane.claims.length === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    lane.busy = false;
    this.forget(queue, consumerId, lane);
  }
}
