/**
 * Which members of the etcd cluster a store URL lists are fit to use, for the npm `etcd3` client's pool. A
 * member without a leader (cut off from the majority, or mid-election), or one that failed a call and then
 * fails a leader check too (down, unreachable), is skipped while another one is fit. A call that hangs on a
 * member is checked against the member's leader and term, and given up (to be retried elsewhere) when the
 * member has no leader or elected one since the call was sent (etcd may have dropped it). The streams
 * (watches, lease keep-alives) open on a member that starts failing are cancelled, so their owners open them
 * again elsewhere. A failing member is probed until it reports a leader, and is then used again.
 */
import type * as Etcd3 from 'etcd3';
import { failStream } from './etcd3-stream.js';

type Lib = typeof Etcd3;
export type Policy = NonNullable<NonNullable<Etcd3.IOptions['faultHandling']>['global']>;

/** A call still unanswered after this long has its member's leader checked (and again each time after). */
const STALL_CHECK_MS = 1000;
/** A leader check (Maintenance Status) unanswered after this long counts as "no leader". */
const PROBE_DEADLINE_MS = 1000;
/** How often a failing member is probed until it reports a leader again. */
const RECHECK_MS = 500;

const NEVER = new AbortController().signal;

interface Cancellable {
  cancel(): void;
  on(event: 'error' | 'status', listener: () => void): unknown;
}

/** What a leader check found: whether the member has a leader, and its raft term (null: no answer). */
interface MemberStatus {
  readonly leader: boolean;
  readonly term: string | null;
}

interface MemberState {
  failing: boolean;
  /** The member's raft term as its last answer told (every response header carries it). */
  term: string | null;
  readonly streams: Set<Cancellable>;
  check: Promise<MemberStatus> | null;
  recheck: NodeJS.Timeout | null;
  probe: Etcd3.Etcd3 | null;
}

/** The member has no leader now: nothing it was asked was applied, and it cannot serve until it has one. */
export const isNoLeader = (error: Error): boolean => /etcdserver: no leader/.test(error.message);

const SKIPPED = 'is failing; not sent there';

/**
 * The call was never sent, or the member refused it for want of a leader: nothing was applied, so it can be
 * tried again as often as there is time for.
 */
export const wasNotSent = (error: Error): boolean => isNoLeader(error) || error.message.endsWith(SKIPPED);

/**
 * Errors that say nothing against the member: a stream closed by its owner, or a read that met a leader
 * change (the member has a leader again).
 */
const isBenign = (error: Error): boolean => /cancelled on client|etcdserver: leader changed/i.test(error.message);

/** The raft term in a response's header, if it has one. */
function termOf(value: unknown): string | null {
  const header = (value as { header?: { raft_term?: string | number } } | null)?.header;
  return header?.raft_term === undefined ? null : String(header.raft_term);
}

const isStream = (value: unknown): value is Cancellable =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as Partial<Cancellable>).cancel === 'function' &&
  typeof (value as Partial<Cancellable>).on === 'function';

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === 'object' && value !== null && typeof (value as Partial<PromiseLike<unknown>>).then === 'function';

export class EtcdMembers {
  private readonly states = new Map<string, MemberState>();
  private closed = false;

  /**
   * `openProbe(host)` makes a client on that one member for its leader checks (no retries, no failover);
   * hosts are the pool's host strings (`http://host:port`).
   */
  constructor(
    private readonly lib: Lib,
    hosts: readonly string[],
    private readonly openProbe: (host: string) => Etcd3.Etcd3,
  ) {
    for (const host of hosts) {
      this.states.set(host, {
        failing: false,
        term: null,
        streams: new Set(),
        check: null,
        recheck: null,
        probe: null,
      });
    }
  }

  /** The pool's per-host fault handling for `host`. */
  policy(host: string): Policy {
    const policy = { execute: (fn: (context: { signal: AbortSignal }) => unknown) => this.execute(host, fn) };
    return policy as unknown as Policy;
  }

  /** The member `host` failed in a way that says it cannot serve now: skip it, move its streams, probe it. */
  markFailing(host: string): void {
    const state = this.states.get(host);
    if (state === undefined || state.failing || this.closed) return;
    state.failing = true;
    const streams = [...state.streams];
    state.streams.clear();
    for (const stream of streams) failStream(stream);
    this.scheduleRecheck(host, state);
  }

  /** The member a stream opened through the pool is on, if it is still open. */
  hostOf(stream: object): string | null {
    for (const [host, state] of this.states) if (state.streams.has(stream as Cancellable)) return host;
    return null;
  }

  close(): void {
    this.closed = true;
    for (const state of this.states.values()) {
      if (state.recheck !== null) clearTimeout(state.recheck);
      state.recheck = null;
      state.probe?.close();
      state.probe = null;
    }
  }

  private async execute(host: string, fn: (context: { signal: AbortSignal }) => unknown): Promise<unknown> {
    const state = this.states.get(host);
    if (state === undefined) return fn({ signal: NEVER });
    if (state.failing && this.anotherFit(host)) {
      // Thrown before the call is made: the pool tries its next host.
      throw new this.lib.GRPCUnavailableError(`etcd member ${host} ${SKIPPED}`);
    }
    let result: unknown;
    try {
      result = fn({ signal: NEVER });
    } catch (error) {
      this.failed(host, error);
      throw error;
    }
    if (isThenable(result)) return this.watched(host, state, result);
    if (isStream(result)) this.track(state, result);
    return result;
  }

  /**
   * A unary call's answer, or a failure as soon as its member turns out to have no leader, or a new term (a
   * leader elected since the call was sent, which may have dropped it). etcd would answer either only at its
   * request timeout, seconds later.
   */
  private watched(host: string, state: MemberState, call: PromiseLike<unknown>): Promise<unknown> {
    let sentInTerm = state.term;
    return new Promise((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | null = null;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        if (timer !== null) clearTimeout(timer);
        return true;
      };
      const check = (): void => {
        void this.status(host).then((status) => {
          if (settled) return;
          const moved = sentInTerm !== null && status.term !== null && status.term !== sentInTerm;
          if (status.leader && !moved) {
            sentInTerm ??= status.term;
            timer = setTimeout(check, STALL_CHECK_MS);
            return;
          }
          // Like a timeout, its outcome is unknown; the caller's retry goes to another member.
          settle();
          if (!status.leader) this.markFailing(host);
          reject(
            new this.lib.GRPCUnavailableError(
              status.leader
                ? `etcd member ${host} elected a new leader during the call`
                : `etcd member ${host} has no leader`,
            ),
          );
        });
      };
      timer = setTimeout(check, STALL_CHECK_MS);
      call.then(
        (value) => {
          if (!settle()) return;
          state.term = termOf(value) ?? state.term;
          resolve(value);
        },
        (error: unknown) => {
          if (!settle()) return;
          this.failed(host, error);
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }

  private track(state: MemberState, stream: Cancellable): void {
    state.streams.add(stream);
    const forget = (): void => void state.streams.delete(stream);
    stream.on('error', forget);
    stream.on('status', forget);
  }

  /** A call on `host` failed: without a leader it is failing; after another fault, if a leader check fails. */
  private failed(host: string, error: unknown): void {
    if (!(error instanceof Error) || !this.lib.isRecoverableError(error) || isBenign(error)) return;
    if (isNoLeader(error)) {
      this.markFailing(host);
      return;
    }
    void this.status(host).then((status) => {
      if (!status.leader) this.markFailing(host);
    });
  }

  private anotherFit(host: string): boolean {
    for (const [other, state] of this.states) if (other !== host && !state.failing) return true;
    return false;
  }

  /** Asks the member for its status (Maintenance Status): its leader (0: none) and term. One at a time. */
  private status(host: string): Promise<MemberStatus> {
    const state = this.states.get(host);
    if (state === undefined || this.closed) return Promise.resolve({ leader: true, term: null });
    if (state.check !== null) return state.check;
    state.probe ??= this.openProbe(host);
    const check = state.probe.maintenance
      .status({ deadline: Date.now() + PROBE_DEADLINE_MS })
      .then(
        (status): MemberStatus => ({ leader: status.leader !== '0', term: status.raftTerm }),
        // Unreachable or unanswered: failing. Refused (a user not allowed Maintenance Status): unknown, so
        // the member is judged by its calls alone.
        (error: unknown): MemberStatus => ({
          leader: !(error instanceof Error && this.lib.isRecoverableError(error)),
          term: null,
        }),
      )
      .finally(() => {
        if (state.check === check) state.check = null;
      });
    state.check = check;
    return check;
  }

  private scheduleRecheck(host: string, state: MemberState): void {
    if (this.closed) return;
    state.recheck = setTimeout(() => {
      state.recheck = null;
      void this.status(host).then(({ leader: ok, term }) => {
        state.term = term ?? state.term;
        if (ok) state.failing = false;
        else if (state.failing) this.scheduleRecheck(host, state);
      });
    }, RECHECK_MS);
    state.recheck.unref();
  }
}
