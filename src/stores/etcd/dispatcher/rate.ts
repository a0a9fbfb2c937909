/**
 * The rate limit's charge: the deliveries a plan grants under the queue's rate limit go in one Txn with
 * the new GCRA `tat` (model/rate-limit.ts) at `/queue/{q}/kvmq/rate`, compared by its mod revision, so the
 * stored tat always counts exactly the deliveries made and a dispatcher taking over goes on from it. One
 * charge is in flight at a time; the next plan waits for its answer.
 */
import type { QueueMirror } from './mirror.js';
import type { Planned } from './types.js';

// One charge fits one Txn: each delivery takes up to 4 ops (delivery, record, index entries) of 128.
export const RATE_TXN_MESSAGES = 25;
export const RATE_TXN_BYTES = 1_000_000;

export function chargeRate(m: QueueMirror, parts: readonly Planned[], tat: number): Planned {
  m.rateInFlight = true;
  const notes = parts.flatMap((p) => p.events?.notes ?? []);
  return {
    compares: [
      ...parts.flatMap((p) => p.compares),
      { key: m.keys.rate, target: 'mod', result: '=', operand: m.rate.rev },
    ],
    ops: [...parts.flatMap((p) => p.ops), { type: 'put', key: m.keys.rate, value: Buffer.from(String(tat), 'utf8') }],
    reads: [...parts.flatMap((p) => p.reads), { type: 'range', key: m.keys.rate }],
    events: notes.length > 0 ? { keys: m.keys, notes } : undefined,
    // Deliveries keep messages live (no change), but whatever a part counts goes with it.
    counts: parts.flatMap((p) => p.counts ?? []),
    onOk: (revision) => {
      m.rateInFlight = false;
      m.rate = { tat, rev: revision };
      for (const p of parts) p.onOk(revision);
    },
    onFail: (reads) => {
      m.rateInFlight = false;
      let at = 0;
      for (const p of parts) {
        p.onFail(reads.slice(at, at + p.reads.length));
        at += p.reads.length;
      }
      const stored = reads[at]?.kvs[0];
      m.rate =
        stored === undefined
          ? { tat: 0, rev: 0 }
          : { tat: Number(stored.value.toString('utf8')) || 0, rev: stored.modRevision };
    },
    onError: () => {
      m.rateInFlight = false;
      for (const p of parts) p.onError();
    },
  };
}
