/**
 * Handlers' reports on PostgreSQL, as on SQLite (src/stores/sqlite/reports.ts, whose row rules both use): one row per
 * message in `reports`, keyed by the message's seq and deleted with it (a trigger, schema.ts reports11), apart from the
 * message row so a progress write does not copy its payload. Written only while the consumer holds the attempt
 * (the message row locked FOR UPDATE, as a finish does), with a `progress` event when progress is set.
 */
import { reportColumns, storedReport, type ReportRow } from '../sqlite/reports.js';
import type { Queryable } from './queryable.js';
import type { WriteContext } from './tx.js';
import type { FinishResult, Report, StoredReport } from '../contract/contract.js';

export async function writeReports(
  tx: WriteContext,
  consumerId: string,
  reports: readonly Report[],
): Promise<FinishResult[]> {
  const { db, s, queue } = tx;
  const results: FinishResult[] = [];
  for (const report of reports) {
    const held = await db.query<{ seq: string; phase: number; consumer: string | null; attempt: number }>(
      `SELECT seq, phase, consumer, attempt FROM ${s}.messages WHERE queue = $1 AND id = $2 FOR UPDATE`,
      [queue, report.id],
    );
    const row = held.rows[0];
    if (row?.phase !== 1 || row.consumer !== consumerId || row.attempt !== report.attempt) {
      results.push('lost');
      continue;
    }
    const stored = await db.query<ReportRow>(`SELECT progress, log, dropped FROM ${s}.reports WHERE seq = $1`, [
      row.seq,
    ]);
    const { progress, log, dropped } = reportColumns(stored.rows[0], report);
    await db.query(
      `INSERT INTO ${s}.reports (seq, progress, log, dropped) VALUES ($1, $2, $3, $4)
       ON CONFLICT (seq) DO UPDATE SET progress = coalesce(excluded.progress, reports.progress),
         log = coalesce(excluded.log, reports.log), dropped = excluded.dropped`,
      [row.seq, progress, log, dropped],
    );
    if (report.progress !== null) tx.event('progress', report.id, report.attempt, report.progress);
    results.push('ok');
  }
  return results;
}

/** A message's reports, or none. */
export async function readReport(db: Queryable, s: string, queue: string, id: string): Promise<StoredReport> {
  const { rows } = await db.query<ReportRow>(
    `SELECT r.progress, r.log, r.dropped FROM ${s}.reports r JOIN ${s}.messages m ON m.seq = r.seq
     WHERE m.queue = $1 AND m.id = $2`,
    [queue, id],
  );
  return storedReport(rows[0]);
}

/** The progress of those of `ids` that have one: id → JSON text. */
export async function readProgress(
  db: Queryable,
  s: string,
  queue: string,
  ids: readonly string[],
): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; progress: string }>(
    `SELECT m.id, r.progress FROM ${s}.messages m JOIN ${s}.reports r ON r.seq = m.seq
     WHERE m.queue = $1 AND m.id = ANY($2::text[]) AND r.progress IS NOT NULL`,
    [queue, ids],
  );
  return new Map(rows.map((row) => [row.id, row.progress]));
}
