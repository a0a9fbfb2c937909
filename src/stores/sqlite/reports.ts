/**
 * Handlers' reports in SQLite: one row per message in kvmq_reports, keyed by the message's seq (so it follows the
 * row to a dead-letter queue, and a trigger deletes it with the row). Kept apart from the message row, whose
 * payload a progress write would otherwise rewrite a few times a second. Written only while the consumer holds
 * the attempt, in the caller's IMMEDIATE transaction, with a `progress` event when progress is set.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { appendLog, EMPTY_LOG, parseStoredLog } from '../../model/reports.js';
import { Phase } from './schema.js';
import type { HeldRow } from './finish.js';
import type { WriteContext } from './failures.js';
import type { FinishResult, Report, StoredReport } from '../contract/contract.js';

const SQL = {
  bySeq: 'SELECT progress, log, dropped FROM kvmq_reports WHERE seq = ?',
  byId: `SELECT r.progress, r.log, r.dropped FROM kvmq_reports r JOIN kvmq_messages m ON m.seq = r.seq
       WHERE m.queue = ? AND m.id = ?`,
  progressOf: `SELECT m.id, r.progress FROM json_each(?) j
       JOIN kvmq_messages m ON m.queue = ? AND m.id = j.value JOIN kvmq_reports r ON r.seq = m.seq
       WHERE r.progress IS NOT NULL`,
  put: `INSERT INTO kvmq_reports (seq, progress, log, dropped) VALUES (@seq, @progress, @log, @dropped)
       ON CONFLICT (seq) DO UPDATE SET progress = coalesce(excluded.progress, progress),
         log = coalesce(excluded.log, log), dropped = excluded.dropped`,
} as const;

/** A kvmq_reports row (both SQL stores). */
export interface ReportRow {
  readonly progress: string | null;
  readonly log: string | null;
  readonly dropped: number;
}

export class ReportTable {
  private readonly sql: { readonly [K in keyof typeof SQL]: BetterSqlite3.Statement };

  constructor(db: BetterSqlite3.Database) {
    this.sql = {
      bySeq: db.prepare(SQL.bySeq),
      byId: db.prepare(SQL.byId),
      progressOf: db.prepare(SQL.progressOf),
      put: db.prepare(SQL.put),
    };
  }

  /** Stores each report of a message the consumer holds (that attempt, locked); `lost` for the others. */
  write(tx: WriteContext, consumerId: string, reports: readonly Report[]): FinishResult[] {
    const { sql, queue } = tx;
    return reports.map((report) => {
      const row = sql.held.get(queue, report.id) as HeldRow | undefined;
      if (row?.phase !== Phase.Locked || row.consumer !== consumerId || row.attempt !== report.attempt) return 'lost';
      this.sql.put.run({
        seq: row.seq,
        ...reportColumns(this.sql.bySeq.get(row.seq) as ReportRow | undefined, report),
      });
      if (report.progress !== null) tx.event('progress', report.id, report.attempt, report.progress);
      return 'ok';
    });
  }

  /** The progress of those of `ids` that have one: id → JSON text. */
  progress(queue: string, ids: readonly string[]): Map<string, string> {
    const rows = this.sql.progressOf.all(JSON.stringify(ids), queue) as { id: string; progress: string }[];
    return new Map(rows.map((row) => [row.id, row.progress]));
  }

  /** A message's reports, or none. */
  read(queue: string, id: string): StoredReport {
    return storedReport(this.sql.byId.get(queue, id) as ReportRow | undefined);
  }
}

/** The row a report writes over `stored`: the log's JSON (null leaves it) with the lines appended, bounded. */
export function reportColumns(stored: ReportRow | undefined, report: Report): ReportRow {
  if (report.lines.length === 0) return { progress: report.progress, log: null, dropped: stored?.dropped ?? 0 };
  const before = stored === undefined ? EMPTY_LOG : parseStoredLog(stored.log, stored.dropped);
  const log = appendLog(before, report.lines);
  return { progress: report.progress, log: JSON.stringify(log.lines), dropped: log.dropped };
}

/** A message's reports from its row, if it has one. */
export function storedReport(row: ReportRow | undefined): StoredReport {
  if (row === undefined) return { progress: null, log: EMPTY_LOG };
  return { progress: row.progress, log: parseStoredLog(row.log, row.dropped) };
}
