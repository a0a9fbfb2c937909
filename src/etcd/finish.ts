/**
 * A kvmq consumer's writes on what it holds, each one Txn per batch guarded
 * by the records' mod revisions: finish (delete the delivery — the ack — and
 * record the outcome), extend (move the lock's end), and release (give back
 * deliveries it never started, when it stops). A record that changed is read
 * again: still ours, the write is retried; taken by another consumer (lock
 * expired, consumer gone) or cleared, the message is `lost`.
 */
import { encodeRecord, type MessageRecord } from './record.js';
import { extended, finished, undelivered } from './transitions.js';
import { decodeRecord } from './record.js';
import { getMany, pack, runBatch, type Change } from './txn-batch.js';
import type { Delivery, LocalConsumer } from './consumer.js';
import type { Kv, Op } from './kv.js';
import type { QueueKeys } from './keys.js';
import type { Finish, FinishResult } from '../store/contract.js';

const MAX_TRIES = 10;

interface Write extends Change {
  readonly delivery: Delivery;
  /** The record written, for the delivery kept (extend) or null when the delivery goes. */
  readonly next: MessageRecord | null;
}

/**
 * Runs writes built from each delivery's current record until each succeeded
 * or its message is no longer this consumer's. Returns the deliveries lost.
 */
async function guarded(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  deliveries: readonly Delivery[],
  build: (d: Delivery, payloads: ReadonlyMap<string, Buffer>) => { ops: Op[]; next: MessageRecord | null },
  needsPayload: (d: Delivery) => boolean,
): Promise<Set<Delivery>> {
  const lost = new Set<Delivery>();
  let todo = [...deliveries];
  for (let tries = 0; todo.length > 0; tries++) {
    if (tries >= MAX_TRIES) throw new Error(`kvmq: writes to ${keys.queue} kept conflicting; try again`);
    const wanting = todo.filter(needsPayload);
    const payloads = new Map<string, Buffer>();
    if (wanting.length > 0) {
      const kvs = await getMany(
        kv,
        wanting.map((d) => keys.payload(d.id)),
      );
      wanting.forEach((d, i) => payloads.set(d.id, kvs[i]?.value ?? Buffer.alloc(0)));
    }
    const writes: Write[] = todo.map((delivery) => {
      const { ops, next } = build(delivery, payloads);
      return {
        delivery,
        next,
        compares: [{ key: keys.record(delivery.id), target: 'mod', result: '=', operand: delivery.rev }],
        ops,
        reads: [{ type: 'range', key: keys.record(delivery.id) }],
      };
    });
    const again: Delivery[] = [];
    await Promise.all(
      pack(writes).map(async (batch) => {
        const { results } = await runBatch(kv, batch);
        batch.forEach((write, i) => {
          const result = results[i];
          if (result === undefined) return;
          const d = write.delivery;
          if (result.ok) {
            if (write.next === null) {
              consumer.removed(d.key, result.revision);
              consumer.freed(result.revision);
            } else {
              d.record = write.next;
              d.rev = result.revision;
            }
            return;
          }
          const kvRecord = result.reads[0]?.kvs[0];
          const record = kvRecord === undefined ? null : decodeRecord(kvRecord.value);
          if (
            kvRecord === undefined ||
            record?.phase !== 'locked' ||
            record.consumer !== consumer.key ||
            record.attempt !== d.record.attempt
          ) {
            lost.add(d);
            consumer.removed(d.key, result.revision);
            return;
          }
          if (kvRecord.modRevision !== d.rev) {
            d.record = record;
            d.rev = kvRecord.modRevision;
          }
          again.push(d);
        });
      }),
    );
    todo = again;
  }
  return lost;
}

export async function finishDeliveries(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  finishes: readonly Finish[],
): Promise<FinishResult[]> {
  const held = new Map<string, { delivery: Delivery; finish: Finish }>();
  for (const f of finishes) {
    const delivery = consumer.byId(f.id);
    if (delivery?.claimed === true && delivery.record.attempt === f.attempt && !held.has(f.id)) {
      held.set(f.id, { delivery, finish: f });
    }
  }
  const build = (d: Delivery, payloads: ReadonlyMap<string, Buffer>): { ops: Op[]; next: null } => {
    const f = held.get(d.id)?.finish;
    if (f === undefined) throw new Error('kvmq: a finish lost track of its message');
    const now = Date.now();
    const result = finished(d.record, f, now);
    const ops: Op[] = [
      { type: 'delete', key: d.key },
      { type: 'put', key: keys.record(d.id), value: encodeRecord(result.record) },
    ];
    if (result.leavesQueue) {
      ops.push({ type: 'delete', key: keys.ordered(d.idx, d.id) });
      ops.push({ type: 'put', key: keys.done(now, d.id), value: Buffer.alloc(0) });
    }
    if (result.keepsPayload) ops.push({ type: 'put', key: keys.payload(d.id), value: d.payload });
    if (result.usesNextPayload) {
      ops.push({ type: 'put', key: keys.ordered(d.idx, d.id), value: payloads.get(d.id) ?? d.payload });
      ops.push({ type: 'delete', key: keys.payload(d.id) });
    }
    return { ops, next: null };
  };
  const lost = await guarded(
    kv,
    keys,
    consumer,
    [...held.values()].map((h) => h.delivery),
    build,
    (d) => d.record.nextEncoding !== null,
  );
  const lostIds = new Set([...lost].map((d) => d.id));
  return finishes.map((f) => (held.get(f.id)?.finish === f && !lostIds.has(f.id) ? 'ok' : 'lost'));
}

/** Extends the locks of held messages; returns the ids no longer held. */
export async function extendDeliveries(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  held: readonly { id: string; attempt: number }[],
  lockMs: number,
): Promise<string[]> {
  const mine: Delivery[] = [];
  const gone: string[] = [];
  for (const h of held) {
    const delivery = consumer.byId(h.id);
    if (delivery?.claimed === true && delivery.record.attempt === h.attempt) mine.push(delivery);
    else gone.push(h.id);
  }
  const lost = await guarded(
    kv,
    keys,
    consumer,
    mine,
    (d) => {
      const next = extended(d.record, Date.now() + lockMs);
      return { ops: [{ type: 'put', key: keys.record(d.id), value: encodeRecord(next) }], next };
    },
    () => false,
  );
  return [...gone, ...[...lost].map((d) => d.id)];
}

/** Gives back deliveries the consumer never handed to a handler: queued again, their attempt undone. */
export async function releaseDeliveries(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  deliveries: readonly Delivery[],
): Promise<void> {
  await guarded(
    kv,
    keys,
    consumer,
    deliveries,
    (d) => ({
      ops: [
        { type: 'delete', key: d.key },
        { type: 'put', key: keys.record(d.id), value: encodeRecord(undelivered(d.record, Date.now(), true)) },
      ],
      next: null,
    }),
    () => false,
  );
}
