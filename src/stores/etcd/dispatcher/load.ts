/**
 * How a dispatcher reads more of its queue than it holds in memory, without
 * ever ranging over a whole prefix per message (etcd 3.4 walks every key of a
 * range, limit or not): the ordered queue in windows of idx time (a bounded
 * range, at most 1000 keys a read, the window narrowing where keys are dense
 * and widening where they are sparse), with the records of what it finds;
 * plain producer keys page by page; payloads it let go; and, when memory
 * holds too many pending messages, forgetting the newest until their turn.
 */
import { IDX_DIGITS, idxAt, idxMs, idxPriority, lifoEnd, priorityBand, PRIORITY_MARK } from '../keys.js';
import { PRIORITY_MAX } from '../../../model/scheduling.js';
import { decodeRecord } from '../record.js';
import { getMany } from '../txn-batch.js';
import { MEMORY_KEEP, WINDOW_LIMIT, type QueueMirror } from './mirror.js';
import { readPage } from './snapshot.js';
import type { Kv } from '../kv.js';
import type { DispatcherLog } from './types.js';
import type { Msg } from './model.js';

const FIRST_SPAN_MS = 1000;
// Keys a producer on a fast clock could have made ahead of ours.
const CLOCK_SKEW_MS = 60_000;
export const PAYLOAD_BUDGET_BYTES = 128 * 1024 * 1024;
// The digits `9{priority:4}` add in front of an idx.
const PRIORITY_BAND_DIGITS = 5;

/** Where the ordered keys of the priorities after `priority` start (keys.ts newIdx): its band's end. */
function bandEnd(prefix: string, priority: number): string {
  if (priority === 0) return prefix + PRIORITY_MARK;
  return priority >= PRIORITY_MAX ? `${prefix}${PRIORITY_MARK}:` : prefix + priorityBand(priority + 1);
}

export class Loader {
  private spanMs = FIRST_SPAN_MS;

  constructor(
    private readonly mirror: QueueMirror,
    private readonly kv: Kv,
    private readonly log: DispatcherLog,
  ) {}

  /** Reads the next window of the ordered queue, with the records of what it finds. */
  async window(): Promise<void> {
    const m = this.mirror;
    const keys = m.keys;
    const from = m.cursor;
    if (from === null) return;
    const { ms: fromMs, priority, lifo } = this.cursorAt(from);
    const final = fromMs === 0 || fromMs > Date.now() + CLOCK_SKEW_MS;
    // Within a priority's band: up to the next band once past the newest time; then one read finds the next band.
    // A priority's LIFO keys (few, and out of time order) are read up to its FIFO keys at once.
    const end =
      lifo !== null
        ? keys.prefix + lifo
        : fromMs === 0
          ? keys.orderedEnd
          : final
            ? bandEnd(keys.prefix, priority)
            : keys.prefix + idxAt(fromMs + this.spanMs, priority);
    const res = await this.kv.range({ key: from, end, limit: WINDOW_LIMIT });
    const found = res.kvs
      .map((kv) => ({ kv, parsed: keys.parse(kv.key) }))
      .filter(
        (f) => f.parsed.kind === 'ordered' && !m.msgs.has(f.parsed.id) && !m.changedWhileReading.has(f.parsed.id),
      );
    const records = await getMany(
      this.kv,
      found.map((f) => (f.parsed.kind === 'ordered' ? keys.record(f.parsed.id) : '')),
    );
    const now = Date.now();
    found.forEach(({ kv, parsed: p }, i) => {
      if (p.kind !== 'ordered') return;
      const recordKv = records[i] ?? null;
      const record = recordKv === null ? null : decodeRecord(recordKv.value);
      if (recordKv === null || record === null) {
        m.warnOnce(kv.key, `ignoring ${kv.key}: no kvmq record for message ${p.id}`);
        return;
      }
      if (record.phase === 'done' || record.idx !== p.idx || m.msgs.has(p.id) || m.changedWhileReading.has(p.id))
        return;
      const msg = m.adopt(p.id, record, recordKv.modRevision, kv.value, now);
      // Locked, with no delivery among those read at the start: its consumer acked it while no dispatcher ran.
      if (record.phase === 'locked') {
        m.orphans.delete(msg);
        m.acks.add(msg);
      }
    });
    const last = res.kvs.at(-1);
    if (res.more && last !== undefined) {
      m.cursor = `${last.key}\0`;
      if (res.count > 4 * WINDOW_LIMIT) this.spanMs = Math.max(1, Math.floor(this.spanMs / 2));
    } else if (end === keys.orderedEnd) {
      m.cursor = null;
    } else {
      m.cursor = end;
      if (res.count < WINDOW_LIMIT / 4) this.spanMs = Math.min(24 * 3600_000, this.spanMs * 4);
    }
  }

  /**
   * The idx time and priority a cursor (an ordered key, or a window's end) stands at; time 0 when not kvmq's
   * idx format (or a band's bare start), which the next read ranges to the end from; `lifo`: where the
   * LIFO keys of the cursor's priority end, when it stands among them.
   */
  private cursorAt(cursor: string): { ms: number; priority: number; lifo: string | null } {
    const prefix = this.mirror.keys.prefix;
    const rest = cursor.slice(prefix.length);
    const digits = /^\d+/.exec(rest)?.[0] ?? '';
    if (digits.length === IDX_DIGITS) return { ms: idxMs(digits), priority: 0, lifo: lifoEnd(digits) };
    const idx = digits.slice(0, IDX_DIGITS + PRIORITY_BAND_DIGITS);
    const priority = idxPriority(idx);
    return priority > 0 ? { ms: idxMs(idx), priority, lifo: lifoEnd(idx) } : { ms: 0, priority: 0, lifo: null };
  }

  /** Reads the next page of plain producer keys that waited while no dispatcher ran. */
  async producers(): Promise<void> {
    const m = this.mirror;
    const entry = m.producerCursors.entries().next();
    if (entry.done === true) return;
    const [prefix, from] = entry.value;
    const page = await readPage(this.kv, prefix, from);
    for (const kv of page.kvs) m.addProducer(kv);
    if (page.next === null) m.producerCursors.delete(prefix);
    else m.producerCursors.set(prefix, page.next);
  }

  /** Reads payloads not held in memory from the ordered queue; false if one is missing (retry later). */
  async payloads(msgs: readonly Msg[]): Promise<boolean> {
    const kvs = await getMany(
      this.kv,
      msgs.map((msg) => msg.orderedKey),
    );
    let complete = true;
    msgs.forEach((msg, i) => {
      const kv = kvs[i];
      if (kv !== null && kv !== undefined) this.mirror.setPayload(msg, kv.value);
      else {
        this.mirror.warnOnce(msg.orderedKey, `${msg.orderedKey} is missing: message ${msg.id} waits for it`);
        complete = false;
      }
    });
    return complete;
  }

  /** Reads the payload a requeued message's next run carries (`/kvmq/payload/{id}`). */
  async nextPayload(msg: Msg): Promise<void> {
    const res = await this.kv.range({ key: this.mirror.keys.payload(msg.id) });
    msg.nextPayload = res.kvs[0]?.value ?? Buffer.alloc(0);
  }

  /** Too many pending messages in memory: forget the newest; they are read again when their turn comes. */
  dropTail(): void {
    const m = this.mirror;
    const pending = [...m.msgs.values()].filter((msg) => msg.record.phase === 'pending' && !msg.busy);
    pending.sort((a, b) => (a.orderedKey < b.orderedKey ? -1 : a.orderedKey > b.orderedKey ? 1 : 0));
    let keep = Math.min(MEMORY_KEEP, pending.length);
    let bytes = 0;
    for (let i = 0; i < keep; i++) {
      bytes += pending[i]?.payload?.length ?? 0;
      if (bytes > PAYLOAD_BUDGET_BYTES / 2) {
        keep = i;
        break;
      }
    }
    const dropped = pending.slice(keep);
    const first = dropped[0];
    if (first === undefined) return;
    for (const msg of dropped) m.forget(msg);
    m.ready.prune();
    if (m.cursor === null || first.orderedKey < m.cursor) m.cursor = first.orderedKey;
    this.log('info', `queue ${m.keys.queue}: ${dropped.length} pending messages left in etcd until their turn`);
  }
}
