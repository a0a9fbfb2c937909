/**
 * One lane per consumer of a queue: a claim reaches the server after every finish the worker made before it, so
 * it sees them (the store's `claimWithFinishes`). What waits goes together: the finishes waiting and the first
 * claim, one piece of work (a statement or a transaction) per round trip. Claims go one at a time; so do finishes
 * sent alone. Finishes made while a claim is on its way do not wait for it: they go at once, on another
 * connection, and the next claim waits for them. The worker claims ahead while its handlers run, so the claim of
 * the next batch and the finishes of the last are at the server together, on two backends. A claim also waits for
 * the consumer's handler transactions being committed.
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
  readonly key: string;
  readonly queue: string;
  readonly consumerId: string;
  finishes: Waiting<readonly Finish[], FinishResult[]>[];
  claims: Waiting<ClaimRequest, ClaimResult>[];
  readonly commits: Set<Promise<unknown>>;
  /** A turn with a claim is at the server (with the finishes that went with it). */
  claiming: boolean;
  /** A turn of finishes alone is at the server. */
  finishing: boolean;
  /** A look at the lane is due on the next turn of the event loop. */
  scheduled: boolean;
}

export class ConsumerLanes {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly run: LaneRunner) {}

  finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]> {
    return new Promise((resolve, reject) => {
      const lane = this.lane(queue, consumerId);
      lane.finishes.push({ input: finishes, resolve, reject });
      this.schedule(lane);
    });
  }

  claim(queue: string, consumerId: string, request: ClaimRequest): Promise<ClaimResult> {
    return new Promise((resolve, reject) => {
      const lane = this.lane(queue, consumerId);
      lane.claims.push({ input: request, resolve, reject });
      this.schedule(lane);
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
      this.schedule(lane);
    });
  }

  private lane(queue: string, consumerId: string): Lane {
    const key = `${queue}\n${consumerId}`;
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = {
        key,
        queue,
        consumerId,
        finishes: [],
        claims: [],
        commits: new Set(),
        claiming: false,
        finishing: false,
        scheduled: false,
      };
      this.lanes.set(key, lane);
    }
    return lane;
  }

  /** Work made in the same tick goes together: the lane is looked at on the next turn of the event loop. */
  private schedule(lane: Lane): void {
    if (lane.scheduled) return;
    lane.scheduled = true;
    setImmediate(() => {
      lane.scheduled = false;
      this.pump(lane);
    });
  }

  /** Starts what may start now: a claim (with the finishes waiting), else finishes alone. */
  private pump(lane: Lane): void {
    const claimMayGo = !lane.claiming && !lane.finishing && lane.commits.size === 0;
    if (lane.claims.length > 0 && claimMayGo) {
      const claim = lane.claims.shift() as Waiting<ClaimRequest, ClaimResult>;
      lane.claiming = true;
      void this.turn(lane, this.takeFinishes(lane), claim).then(() => {
        lane.claiming = false;
        // What waits goes next, a tick later: the worker answers a claim with its next one, which joins it.
        this.schedule(lane);
      });
      return;
    }
    if (lane.finishes.length > 0 && !lane.finishing) {
      lane.finishing = true;
      void this.turn(lane, this.takeFinishes(lane), null).then(() => {
        lane.finishing = false;
        this.schedule(lane);
      });
      return;
    }
    const idle = !lane.claiming && !lane.finishing && lane.commits.size === 0;
    if (idle && lane.finishes.length === 0 && lane.claims.length === 0 && this.lanes.get(lane.key) === lane) {
      this.lanes.delete(lane.key);
    }
  }

  private takeFinishes(lane: Lane): Waiting<readonly Finish[], FinishResult[]>[] {
    const finishes = lane.finishes;
    lane.finishes = [];
    return finishes;
  }

  private async turn(
    lane: Lane,
    finishes: Waiting<readonly Finish[], FinishResult[]>[],
    claim: Waiting<ClaimRequest, ClaimResult> | null,
  ): Promise<void> {
    try {
      const done = await this.run(
        lane.queue,
        lane.consumerId,
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
  }
}
