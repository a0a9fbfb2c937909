/**
 * The process's session lease on the npm `etcd3` client, kept alive by kvmq itself: each renewal is one short
 * keep-alive exchange through the pool, so it goes to a fit member, and one that does not answer in time
 * marks its member failing and is tried again on another at once. A lease with a TTL of seconds thus survives
 * a member that lost its leader (etcd3's own keep-alive stays on one stream until the lease's TTL passes).
 */
import { LeaseLostListeners } from './lease-listeners.js';
import type * as Etcd3 from 'etcd3';
import { StoreUnavailableError } from '../../model/errors.js';
import type { Session } from './kv.js';
import type { EtcdMembers } from './etcd3-members.js';
import { closeStream, failStream } from './etcd3-stream.js';

type KeepAliveStream = Etcd3.IDuplexStream<Etcd3.ILeaseKeepAliveRequest, Etcd3.ILeaseKeepAliveResponse>;

/** How a renewal ended: renewed, the lease is gone (etcd answered TTL 0), or no answer from that member. */
type Renewal = 'renewed' | 'gone' | 'failed';

/** Runs `fn` once after `ms`, without keeping the process alive. */
function after(ms: number, fn: () => void): NodeJS.Timeout {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return timer;
}

/** One granted lease and the loop that renews it until it is lost or closed. */
class KeptLease {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private lastRenewed = Date.now();
  /**
   * The performance.now() before which etcd cannot have ended the lease: the send time of the last acknowledged
   * keep-alive (or of the grant) plus the TTL, since etcd counts the TTL from when it got the request.
   */
  liveUntil: number;

  constructor(
    readonly id: string,
    private readonly client: Etcd3.Etcd3,
    private readonly members: EtcdMembers,
    private readonly ttlMs: number,
    grantSentAt: number,
    private readonly onLost: () => void,
  ) {
    this.liveUntil = grantSentAt + ttlMs;
    this.schedule(this.ttlMs / 3);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(ms: number): void {
    if (!this.stopped) this.timer = after(ms, () => void this.renew());
  }

  private async renew(): Promise<void> {
    this.timer = null;
    const sentAt = Date.now();
    const sentAtMonotonic = performance.now();
    const renewal = await this.renewOnce();
    if (this.stopped) return;
    if (renewal === 'renewed') {
      this.lastRenewed = sentAt;
      this.liveUntil = Math.max(this.liveUntil, sentAtMonotonic + this.ttlMs);
      this.schedule(this.ttlMs / 3);
      return;
    }
    // Unanswered for two TTLs: etcd has surely let it expire (the same bound etcd3's own keep-alive uses).
    if (renewal === 'gone' || Date.now() - this.lastRenewed > 2 * this.ttlMs) {
      this.stop();
      this.onLost();
      return;
    }
    // Another member, now (the pool skips the one just marked failing), after a breath if all are failing.
    this.schedule(100);
  }

  /** One keep-alive request and its answer, given at most a quarter of the TTL (and a second) to come. */
  private async renewOnce(): Promise<Renewal> {
    let stream: KeepAliveStream;
    try {
      stream = await this.client.leaseClient.leaseKeepAlive();
    } catch {
      return 'failed';
    }
    return new Promise<Renewal>((resolve) => {
      let settled = false;
      const finish = (renewal: Renewal): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (renewal === 'failed') {
          const host = this.members.hostOf(stream);
          if (host !== null) this.members.markFailing(host);
          failStream(stream);
        } else {
          closeStream(stream);
        }
        resolve(renewal);
      };
      const timer = after(Math.min(1000, this.ttlMs / 4), () => finish('failed'));
      stream.on('data', (res) => finish(res.TTL === '0' ? 'gone' : 'renewed'));
      stream.on('error', () => finish('failed'));
      stream.write({ ID: this.id });
    });
  }
}

export class EtcdSession implements Session {
  private lease: KeptLease | null = null;
  private granted: Promise<string> | null = null;
  private readonly lostListeners = new LeaseLostListeners();
  private closed = false;

  constructor(
    private readonly client: Etcd3.Etcd3,
    private readonly members: EtcdMembers,
    private readonly ttlSeconds: number,
    private readonly translate: (error: unknown) => Error,
  ) {}

  leaseId(): Promise<string> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('the etcd store is closed'));
    if (this.granted !== null) return this.granted;
    const sentAt = performance.now();
    const granted = this.client.leaseClient.leaseGrant({ TTL: this.ttlSeconds }).then(
      (res) => {
        const id = res.ID;
        if (this.granted !== granted || this.closed) return id;
        this.lease = new KeptLease(id, this.client, this.members, this.ttlSeconds * 1000, sentAt, () =>
          this.lost(granted),
        );
        return id;
      },
      (error: unknown) => {
        if (this.granted === granted) this.granted = null;
        throw this.translate(error);
      },
    );
    this.granted = granted;
    return granted;
  }

  liveUntil(): number {
    return this.lease === null ? -Infinity : this.lease.liveUntil;
  }

  onLost(listener: (leaseId: string) => void): () => void {
    return this.lostListeners.add(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    const lease = this.lease;
    this.lease = null;
    this.granted = null;
    lease?.stop();
    // Revoking drops the session's keys (registrations, dispatcher claims) now instead of at the TTL.
    if (lease !== null) await this.client.leaseClient.leaseRevoke({ ID: lease.id }).catch(() => undefined);
  }

  private lost(granted: Promise<string>): void {
    if (this.granted !== granted) return;
    const id = this.lease?.id;
    this.lease = null;
    this.granted = null;
    if (id === undefined) return;
    this.lostListeners.tell(id);
  }
}
