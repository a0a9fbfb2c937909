/**
 * Handoffs to idle workers (src/stores/redis/lua/lib/handoff.lua): an enqueue claims
 * messages for a parked worker and pushes them to the worker's list, where a
 * BLPOP on a connection of the worker's own waits for them. The message
 * reaches the handler one round trip after the enqueue, with no wake-up and
 * no claim in between.
 *
 * A worker takes handoffs only while its BLPOP waits on a ready connection
 * (`live`): its claims say so, and only such a claim parks it. An entry the
 * BLPOP took whose reply was lost with the connection stays locked to the
 * worker until its lock ends, as a held message of a dead worker does.
 */
import { claimed } from './claim.js';
import { num, text } from './codec.js';
import { StoreLayoutError } from '../../model/errors.js';
import { within } from '../../model/time.js';
import { SCRIPTS } from './scripts.generated.js';
import type { RedisConnection } from './connection.js';
import type { Scripts } from './scripts.js';
import type { ClaimedMessage, HandoffListener, HandoffReceiver } from '../contract/contract.js';

// After a failed BLPOP (the connection went away), the next try waits this long.
const RETRY_MS = 200;
// A stop waits at most this long for the BLPOP's last reply (the stop's wake-up entry, or a handoff before it).
const STOP_WAIT_MS = 2000;

export class Handoffs implements HandoffReceiver {
  private connection: RedisConnection | null = null;
  private stopping = false;
  private closing: Promise<void> | null = null;
  private readonly loop: Promise<void>;
  /** The token of the last claim that could park this worker, and the handed messages received since it was sent. */
  private token = 0;
  private received = 0;
  /**
   * The claims that could park this worker, by token, oldest first: when each was sent (performance.now()) and
   * the lock it asked for. An enqueue hands messages only while a parking stands, and a parking stands only
   * after its claim was sent, so a handed message's lock counts from no earlier than its token's claim.
   */
  private readonly parkings = new Map<string, { sentAt: number; lockMs: number }>();

  constructor(
    private readonly scripts: Scripts,
    private readonly queue: string,
    private readonly consumerId: string,
    private readonly list: string,
    open: () => Promise<RedisConnection>,
    private readonly listener: HandoffListener,
    private readonly where: string,
  ) {
    // Never rejects: what fails is reported, and the worker claims as before.
    this.loop = this.receive(open).catch((error: unknown) => listener.failed(error));
  }

  /** Whether an enqueue may hand this worker messages now: its BLPOP waits on a ready connection. */
  get live(): boolean {
    return !this.stopping && this.connection?.status === 'ready';
  }

  /**
   * The handoff argument of a claim (lua/claim.lua): its token, the last claim's, and how many handed messages
   * arrived since that one went out, so the claim takes fewer by those still on their way.
   */
  claimArgument(lockMs: number): string {
    const last = String(this.token);
    this.token += 1;
    const sentAt = performance.now();
    // Forget the parkings whose locks would have ended by now (a handoff under them arrives too late anyway).
    for (const [token, parking] of this.parkings) {
      if (parking.sentAt + parking.lockMs > sentAt) break;
      this.parkings.delete(token);
    }
    this.parkings.set(String(this.token), { sentAt, lockMs });
    // Whatever token they came under: the store counts those still on their way since the last claim, carried
    // over from earlier parkings (lib/handoff.lua).
    const received = this.received;
    this.received = 0;
    return `${this.token} ${last} ${received}`;
  }

  /**
   * Ends the parking: the messages handed over and not yet taken come back from the list and are
   * delivered, and so is anything the BLPOP took before; then the connection closes.
   */
  close(): Promise<void> {
    this.closing ??= this.end();
    return this.closing;
  }

  private async end(): Promise<void> {
    this.stopping = true;
    try {
      // With the server gone, the unpark may wait in a connection that is closed meanwhile and never answers.
      const entries = await within(this.scripts.run(SCRIPTS.unpark, this.queue, [this.consumerId]), STOP_WAIT_MS);
      for (const entry of (entries ?? []) as Buffer[]) this.deliverEntry(entry);
    } finally {
      // The unpark script pushed an empty entry that ends the BLPOP. A connection that is down may never
      // answer it: then the stop goes on without it (an entry taken after that waits for its lock to end).
      await within(this.loop, STOP_WAIT_MS);
      this.connection?.disconnect();
    }
  }

  private async receive(open: () => Promise<RedisConnection>): Promise<void> {
    const connection = await open();
    this.connection = connection;
    // Failures surface as failed BLPOPs; ioredis reconnects by itself.
    connection.on('error', () => undefined);
    // A worker that waited while the connection was not ready was not parked: it claims again now.
    connection.on('ready', () => this.listener.ready());
    if (connection.status === 'ready') this.listener.ready();
    try {
      while (!this.stopping || connection.status === 'ready') {
        let reply: [Buffer, Buffer] | null;
        try {
          reply = await connection.blpopBuffer(this.list, 0);
        } catch (error) {
          if (this.stopping || /NOPERM/.test(String(error))) return;
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
          continue;
        }
        const entry = reply?.[1];
        if (entry === undefined || entry.length === 0) {
          if (this.stopping) return;
          continue;
        }
        this.deliverEntry(entry);
      }
    } finally {
      connection.disconnect();
    }
  }

  /** Delivers an entry's messages; one kvmq did not write is reported and skipped, and the receiving goes on. */
  private deliverEntry(entry: Buffer): void {
    const messages: ClaimedMessage[] = [];
    let fields: (Buffer | null)[];
    let since = 0;
    let known: { sentAt: number; lockMs: number } | undefined;
    try {
      fields = unframe(entry);
      if (fields.length < 2 || (fields.length - 2) % 6 !== 0) throw new Error(`${fields.length} fields`);
      // A token this worker no longer knows: its parking's locks have ended, and the messages are not started.
      known = this.parkings.get(text(fields[0]) ?? '');
      const parking = known ?? { sentAt: performance.now(), lockMs: 0 };
      for (let at = 2; at < fields.length; at += 6) messages.push(claimed(fields, at, this.where, parking.lockMs));
      since = parking.sentAt;
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      this.listener.failed(
        new StoreLayoutError(
          `${this.where}: an entry of ${this.list} was not written by kvmq (${why}); ` +
            'the messages handed over with it, if any, go to a worker once their locks end',
        ),
      );
      return;
    }
    // Late ones take no slot, and the store stops owing them within a lock of its own (lib/handoff.lua).
    if (known !== undefined) this.received += messages.length;
    if (messages.length > 0) this.listener.delivered(messages, num(fields[1]), since);
  }
}

/**
 * The fields of a handoff entry (the parking's token, the queue's size, then six per message): each
 * `<length>:<bytes>`, or `-:` for none (null).
 */
export function unframe(entry: Buffer): (Buffer | null)[] {
  const fields: (Buffer | null)[] = [];
  let at = 0;
  while (at < entry.length) {
    const colon = entry.indexOf(0x3a, at);
    if (colon < 0) throw new Error('a handoff entry ends inside a field length');
    const head = entry.toString('latin1', at, colon);
    if (head === '-') {
      fields.push(null);
      at = colon + 1;
      continue;
    }
    const length = Number(head);
    const end = colon + 1 + length;
    if (!/^\d+$/.test(head) || end > entry.length) throw new Error(`a handoff entry has a bad field length: ${head}`);
    fields.push(entry.subarray(colon + 1, end));
    at = end;
  }
  return fields;
}
