/**
 * The store's one pinned connection, outside the pool: it LISTENs on the schema's channel (channel.ts) and
 * holds a session advisory lock per live consumer of this process, which PostgreSQL releases the moment the
 * session ends, however the process died: a claim then sweeps that consumer's messages back (release.ts).
 *
 * It connects on first use and again after it is lost (each time telling every subscriber, since a
 * notification may have been missed, and taking the held locks again). While it is down, subscribers are
 * called every POLL_MS instead: the poll fallback.
 */
import type { Client } from 'pg';
import { parseCancelPayload, wakeChannel } from './channel.js';
import type { CanceledMessage } from '../contract/contract.js';

/** Told the canceled message a cancel's payload names; nothing for any other payload, or a possible miss. */
export type SessionListener = (canceled?: CanceledMessage) => void;
import { quoteIdent } from './sql-text.js';

const POLL_MS = 1000;
const RECONNECT_MS = 500;
// While it holds consumer locks, the session is pinged this often; a worker trusts it this long after the send
// of the last answered ping (a silent link ends its claims soon, as a dead one does at once).
const PING_MS = 1000;
const TRUST_MS = 5000;

export class Session {
  private client: Client | null = null;
  private connecting: Promise<Client> | null = null;
  private readonly listeners = new Map<string, Set<SessionListener>>();
  private readonly locks = new Set<number>();
  private poll: NodeJS.Timeout | null = null;
  private retry: NodeJS.Timeout | null = null;
  // When the connection holding consumer locks was lost (performance.now()), and until when that loss stands:
  // a worker may have trusted the session until the last answered ping's trust ran out.
  private lostAt: number | null = null;
  private lostUntil = 0;
  // The send time of the last answered query on the connection, and the ping timer.
  private answeredAt = -Infinity;
  private pinger: NodeJS.Timeout | null = null;
  private pinging = false;
  private closed = false;

  constructor(
    private readonly schema: string,
    /** The namespace of the consumer locks: the first key of each two-key advisory lock. */
    readonly lockSpace: number,
    private readonly newClient: () => Client,
  ) {}

  /** Calls `listener` when a notification with this payload arrives (or may have been missed). */
  subscribe(payload: string, listener: SessionListener): () => void {
    let set = this.listeners.get(payload);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(payload, set);
    }
    set.add(listener);
    this.connectSoon();
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(payload);
    };
  }

  /** Takes the advisory lock `key` for this session (once); resolves when it is held. */
  async hold(key: number): Promise<void> {
    if (this.locks.has(key)) return;
    const client = await this.connect();
    const sent = performance.now();
    await client.query('SELECT pg_try_advisory_lock($1, $2)', [this.lockSpace, key]);
    this.answeredAt = Math.max(this.answeredAt, sent);
    this.locks.add(key);
    this.startPinging();
  }

  async release(key: number): Promise<void> {
    if (!this.locks.delete(key) || this.client === null) return;
    await this.client.query('SELECT pg_advisory_unlock($1, $2)', [this.lockSpace, key]);
  }

  /**
   * Until when this process's consumer locks are surely held: for ever while the connection holding them is up
   * (PostgreSQL releases them only when the session ends), else the moment it was lost.
   */
  heldUntil(): number {
    if (this.lostAt !== null) {
      if (this.client === null || performance.now() < this.lostUntil) return this.lostAt;
      this.lostAt = null;
    }
    return this.locks.size === 0 ? Infinity : this.answeredAt + TRUST_MS;
  }

  /**
   * How long claims for the consumer of `key` are pointless (ms): its session was lost, and until every fence
   * armed on the old session has fired, a worker would give back what it claims.
   */
  lostFor(key: number): number {
    if (!this.locks.has(key) || this.heldUntil() === Infinity || this.lostAt === null) return 0;
    return Math.max(RECONNECT_MS, this.lostUntil - performance.now());
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.stopPolling();
    if (this.pinger !== null) clearInterval(this.pinger);
    if (this.retry !== null) clearTimeout(this.retry);
    const client = this.client ?? (await this.connecting?.catch(() => null)) ?? null;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private connectSoon(): void {
    if (this.client === null && this.connecting === null && this.retry === null) {
      this.connect().catch(() => this.lost());
    }
  }

  private connect(): Promise<Client> {
    if (this.client !== null) return Promise.resolve(this.client);
    this.connecting ??= this.open().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async open(): Promise<Client> {
    const sent = performance.now();
    const client = this.newClient();
    client.on('error', () => this.drop(client));
    client.on('end', () => this.drop(client));
    client.on('notification', (message) => this.tell(message.payload ?? ''));
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(wakeChannel(this.schema))}`);
      for (const key of this.locks) await client.query('SELECT pg_try_advisory_lock($1, $2)', [this.lockSpace, key]);
      if (this.closed) throw new Error('the PostgreSQL store is closed');
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    this.client = client;
    this.answeredAt = sent;
    this.stopPolling();
    // Anything sent while there was no listener is unknown: everyone looks.
    this.tellAll();
    return client;
  }

  private drop(client: Client): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.locks.size > 0 && this.lostAt === null) {
      this.lostAt = performance.now();
      this.lostUntil = this.answeredAt + TRUST_MS;
    }
    client.end().catch(() => undefined);
    this.lost();
  }

  /** No listening connection: poll, and try again soon while anyone listens or holds locks. */
  private lost(): void {
    if (this.closed) return;
    this.tellAll();
    this.poll ??= setInterval(() => this.tellAll(), POLL_MS);
    this.poll.unref();
    if (this.retry !== null) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      if (this.listeners.size > 0 || this.locks.size > 0) this.connect().catch(() => this.lost());
    }, RECONNECT_MS);
    this.retry.unref();
  }

  /** Pings the connection while it holds consumer locks, so heldUntil() moves on while it answers. */
  private startPinging(): void {
    if (this.pinger !== null) return;
    this.pinger = setInterval(() => {
      const client = this.client;
      if (client === null || this.pinging || this.locks.size === 0) return;
      this.pinging = true;
      const sent = performance.now();
      client
        .query('SELECT 1')
        .then(() => (this.answeredAt = Math.max(this.answeredAt, sent)))
        .catch(() => this.drop(client))
        .finally(() => (this.pinging = false));
    }, PING_MS);
    this.pinger.unref();
  }

  private stopPolling(): void {
    if (this.poll !== null) clearInterval(this.poll);
    this.poll = null;
  }

  private tell(payload: string): void {
    const cancel = parseCancelPayload(payload);
    if (cancel !== null) {
      for (const listener of this.listeners.get(cancel.key) ?? []) listener(cancel.message);
      return;
    }
    for (const listener of this.listeners.get(payload) ?? []) listener();
  }

  private tellAll(): void {
    for (const set of this.listeners.values()) for (const listener of set) listener();
  }
}

/** A stable 31-bit key for a name (FNV-1a), for the advisory locks. */
export function lockKey(name: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash & 0x7fffffff;
}
