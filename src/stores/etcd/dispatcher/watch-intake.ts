/**
 * What the dispatcher learns from its watches, one revision at a time: the
 * watch events of one Txn arrive together, so a message's record (its version)
 * decides what its other keys' watch events mean. A record that changed moves the
 * message; a delivery deleted with no record change is a plain consumer's
 * ack; an ordered key deleted with no record change was deleted outside the
 * protocol and is put back; puts the protocol does not know are logged.
 */
import { decodeRecord } from '../record.js';
import type { WatchEvent } from '../kv.js';
import type { DispatcherLog } from './types.js';
import type { QueueMirror } from './mirror.js';

/** Watch events held back while the dispatcher reads more of its queue, in the order they came. */
type Deferred =
  { readonly producer: WatchEvent } | { readonly id: string; readonly watchEvents: readonly WatchEvent[] };

export class WatchIntake {
  private deferred: Deferred[] = [];
  /** Messages with deferred watch events: their later ones wait too, to keep the order. */
  private readonly deferredIds = new Set<string>();
  /** The last revision of the long-prefix watch (the ordered queue's) applied, and the first one deferred. */
  private applied = 0;
  private firstDeferred = Infinity;

  constructor(
    private readonly mirror: QueueMirror,
    private readonly term: number,
    private readonly lose: (reason: string) => void,
    private readonly log: DispatcherLog,
  ) {}

  /**
   * The revision up to which the mirror holds every ordered key: those created later it has not seen (a
   * delivery's priority guard compares it).
   */
  get seenRevision(): number {
    return Math.min(this.applied, this.firstDeferred - 1);
  }

  /** The mirror starts from a snapshot read at `revision`. */
  startAt(revision: number): void {
    this.applied = revision;
  }

  /** Applies watch events (in revision order); `ordered`: from the watch of the long prefix. */
  apply(watchEvents: readonly WatchEvent[], ordered = false): void {
    let i = 0;
    while (i < watchEvents.length) {
      const revision = watchEvents[i]?.kv.modRevision ?? 0;
      let j = i;
      while (j < watchEvents.length && watchEvents[j]?.kv.modRevision === revision) j++;
      this.onRevision(watchEvents.slice(i, j));
      if (ordered) this.applied = Math.max(this.applied, revision);
      i = j;
    }
  }

  onRevision(group: readonly WatchEvent[]): void {
    const byId = new Map<string, WatchEvent[]>();
    for (const event of group) {
      const parsed = this.mirror.keys.parse(event.kv.key);
      switch (parsed.kind) {
        case 'election':
          if (event.type === 'delete' || event.kv.createRevision !== this.term) {
            this.lose('another node holds the queue now');
            return;
          }
          break;
        case 'producer':
          if (this.mirror.reading) this.deferred.push({ producer: event });
          else this.onProducer(event);
          break;
        case 'registration':
          if (event.type === 'delete') this.mirror.onUnregistration(parsed.consumerKey);
          else this.mirror.onRegistration(event.kv);
          break;
        case 'record':
        case 'ordered':
        case 'delivery': {
          if (parsed.kind === 'ordered') {
            if (event.type === 'delete') this.mirror.orderedCount -= 1;
            else if (event.kv.version === 1) this.mirror.orderedCount += 1;
          }
          const list = byId.get(parsed.id);
          if (list === undefined) byId.set(parsed.id, [event]);
          else list.push(event);
          break;
        }
        case 'kvmq':
          if (event.kv.key === this.mirror.keys.config)
            this.mirror.onConfig(event.type === 'put' ? event.kv.value : null);
          else if (event.kv.key === this.mirror.keys.rate) this.mirror.onRate(event);
          else if (event.type === 'delete' && event.kv.key.startsWith(this.mirror.keys.groupRates))
            this.mirror.groupRates.deleted(event.kv.key, event.kv.modRevision);
          break;
        case 'answer':
          break;
        case 'foreign':
          if (event.type === 'put')
            this.mirror.warnOnce(event.kv.key, `ignoring a put to ${event.kv.key}: ${parsed.why}`);
          break;
      }
    }
    for (const [id, watchEvents] of byId) {
      // A message not in memory may be in the part of the queue being read: judged once the read is done.
      if (this.mirror.reading && (!this.mirror.msgs.has(id) || this.deferredIds.has(id))) {
        this.deferred.push({ id, watchEvents });
        this.deferredIds.add(id);
        this.firstDeferred = Math.min(this.firstDeferred, watchEvents[0]?.kv.modRevision ?? 0);
      } else {
        if (this.mirror.reading) this.mirror.changedWhileReading.add(id);
        this.onMessage(id, watchEvents);
      }
    }
  }

  /** Applies what waited for a read of the queue, now that its cursors have moved. */
  replay(): void {
    const deferred = this.deferred;
    this.deferred = [];
    this.deferredIds.clear();
    this.firstDeferred = Infinity;
    for (const d of deferred) {
      if ('producer' in d) this.onProducer(d.producer);
      else this.onMessage(d.id, d.watchEvents);
    }
  }

  onMessage(id: string, watchEvents: readonly WatchEvent[]): void {
    const msg = this.mirror.msgs.get(id);
    // The id's record key, compared as a string: parsing each key again cost more than the rest of this.
    const recordKey = this.mirror.keys.record(id);
    const recordEvent = watchEvents.find((e) => e.kv.key === recordKey);
    if (recordEvent !== undefined) {
      if (msg !== undefined && recordEvent.kv.modRevision <= msg.rev) return;
      if (recordEvent.type === 'delete') {
        if (msg !== undefined) this.mirror.forget(msg);
        return;
      }
      const record = decodeRecord(recordEvent.kv.value);
      if (record === null) {
        this.mirror.warnOnce(recordEvent.kv.key, `ignoring ${recordEvent.kv.key}: not a record kvmq wrote`);
        return;
      }
      const orderedPut = watchEvents.find(
        (e) => e.type === 'put' && this.mirror.keys.parse(e.kv.key).kind === 'ordered',
      );
      if (msg !== undefined) {
        this.mirror.reconcile(msg, record, recordEvent.kv.modRevision, orderedPut?.kv.value ?? null);
        return;
      }
      if (record.phase === 'done' || record.idx === null) return;
      if (record.phase === 'pending' && this.mirror.beyondCursor(this.mirror.keys.ordered(record.idx, id))) return;
      this.mirror.adopt(id, record, recordEvent.kv.modRevision, orderedPut?.kv.value ?? null, Date.now());
      return;
    }
    for (const event of watchEvents) {
      const parsed = this.mirror.keys.parse(event.kv.key);
      if (event.type === 'put') {
        const ours =
          msg !== undefined && (msg.busy || event.kv.key === msg.deliveryKey || event.kv.key === msg.orderedKey);
        if (!ours)
          this.mirror.warnOnce(event.kv.key, `ignoring a put to ${event.kv.key}: only the dispatcher writes there`);
        continue;
      }
      if (msg === undefined) continue;
      if (parsed.kind === 'delivery') {
        // A delete of a delivery is an ack, whoever sent it (etcd roles can limit consumers to their own prefix).
        if (msg.busy) msg.ackedKey = event.kv.key;
        else if (event.kv.key === msg.deliveryKey) this.mirror.acks.add(msg);
      } else if (parsed.kind === 'ordered' && event.kv.key === msg.orderedKey) {
        // The watch carries no previous values (they cost etcd more than the rest of its work for kvmq): the
        // payload in memory, or else the key read back at the revision before its delete.
        this.log('warn', `${event.kv.key} was deleted outside the protocol (acks delete a delivery); restoring it`);
        this.mirror.restores.set(msg, { value: msg.payload, deletedAt: event.kv.modRevision });
      }
    }
  }

  onProducer(event: WatchEvent): void {
    const key = event.kv.key;
    if (event.type === 'delete') {
      this.mirror.producerCount -= 1;
      const put = this.mirror.producers.get(key);
      if (put !== undefined && !put.busy) this.mirror.producers.delete(key);
      return;
    }
    if (event.kv.version === 1) this.mirror.producerCount += 1;
    for (const [prefix, next] of this.mirror.producerCursors) if (key.startsWith(prefix) && key >= next) return;
    this.mirror.addProducer(event.kv);
  }
}
