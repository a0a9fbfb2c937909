/**
 * Handlers' reports on etcd: one key per message, `/kvmq/report/{id}`, its value the latest progress and the
 * bounded log as JSON. Written in a Txn guarded by the record's mod revision, as an extend is (the record put
 * again unchanged, so the consumer's revision of it stays the record's): a holder that lost the message gets
 * `lost` and writes nothing. Only the holder writes while it holds, so it keeps the stored value with its
 * delivery and appends to that, read once per delivery.
 */
import { applyReport, decodeReport, encodeReport, NO_REPORT } from '../contract/report-codec.js';
import { changeEvents } from './event-ops.js';
import { guarded } from './finish.js';
import { encodeRecord } from './record.js';
import { getMany } from './txn-batch.js';
import type { Delivery, LocalConsumer } from './consumer.js';
import type { Kv } from './kv.js';
import type { QueueKeys } from './keys.js';
import type { FinishResult, Report, StoredReport } from '../contract/contract.js';

export async function writeReports(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  reports: readonly Report[],
  events: boolean,
): Promise<FinishResult[]> {
  const held = new Map<Delivery, Report>();
  for (const report of reports) {
    const delivery = consumer.byId(report.id);
    if (delivery?.claimed === true && delivery.record.attempt === report.attempt) held.set(delivery, report);
  }
  // What earlier attempts left, read once per delivery.
  const unread = [...held.keys()].filter((d) => d.report === undefined);
  if (unread.length > 0) {
    const kvs = await getMany(
      kv,
      unread.map((d) => keys.report(d.id)),
    );
    unread.forEach((d, i) => (d.report = decodeReport(kvs[i]?.value)));
  }
  const written = new Map<Delivery, StoredReport>();
  const lost = await guarded(
    kv,
    keys,
    consumer,
    [...held.keys()],
    (d) => {
      const report = held.get(d) as Report;
      const next = applyReport(d.report ?? NO_REPORT, report);
      written.set(d, next);
      const event =
        report.progress === null
          ? undefined
          : { type: 'progress' as const, id: d.id, attempt: d.record.attempt, error: report.progress };
      return {
        ops: [
          { type: 'put', key: keys.record(d.id), value: encodeRecord(d.record) },
          { type: 'put', key: keys.report(d.id), value: encodeReport(next) },
        ],
        next: d.record,
        deadLetter: null,
        events: event === undefined ? undefined : changeEvents(keys, events, event),
        owed: null,
        counts: undefined,
      };
    },
    () => false,
  );
  for (const [d, report] of written) if (!lost.has(d)) d.report = report;
  return reports.map((report) => {
    const delivery = consumer.byId(report.id);
    return delivery !== undefined && held.get(delivery) === report && !lost.has(delivery) ? 'ok' : 'lost';
  });
}
