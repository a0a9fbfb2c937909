/** A message's reports as one JSON value, for the stores that keep them in one key or node (etcd, ZooKeeper). */
import { appendLog, EMPTY_LOG } from '../../model/reports.js';
import type { Report, StoredReport } from './contract.js';

export const NO_REPORT: StoredReport = { progress: null, log: EMPTY_LOG };

/** The stored value (or none) as reports; `{"progress", "log", "dropped"}`. */
export function decodeReport(value: Buffer | null | undefined): StoredReport {
  if (value == null) return NO_REPORT;
  const { progress, log, dropped } = JSON.parse(value.toString()) as {
    progress: string | null;
    log: string[];
    dropped: number;
  };
  return { progress, log: { lines: log, dropped } };
}

export function encodeReport(report: StoredReport): Buffer {
  const { progress, log } = report;
  return Buffer.from(JSON.stringify({ progress, log: log.lines, dropped: log.dropped }));
}

/** What is stored after `report`: its progress if it has one, its lines appended to the bounded log. */
export function applyReport(before: StoredReport, report: Report): StoredReport {
  return {
    progress: report.progress ?? before.progress,
    log: report.lines.length === 0 ? before.log : appendLog(before.log, report.lines),
  };
}
