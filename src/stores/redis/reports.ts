/** Handlers' reports (progress, log lines) on Redis: one report.lua call per batch, read back by inspect. */
import { LOG_MAX_BYTES, LOG_MAX_LINES, type StoredLog } from '../../model/reports.js';
import { list, num, text } from './codec.js';
import { SCRIPTS } from './scripts.generated.js';
import type { ScriptArg, Scripts } from './scripts.js';
import type { FinishResult, Report, StoredReport } from '../contract/contract.js';

export async function writeReports(
  scripts: Scripts,
  queue: string,
  consumerId: string,
  reports: readonly Report[],
): Promise<FinishResult[]> {
  if (reports.length === 0) return [];
  const args: ScriptArg[] = [consumerId, LOG_MAX_LINES, LOG_MAX_BYTES];
  for (const { id, attempt, progress, lines } of reports) {
    args.push(id, attempt, progress ?? '', lines.length === 0 ? '' : JSON.stringify(lines));
  }
  const replies = list(await scripts.run(SCRIPTS.report, queue, args));
  return replies.map((stored) => (num(stored) === 1 ? 'ok' : 'lost'));
}

/** A message's reports from inspect's reply: its progress JSON and its log JSON (`{d, l}`), each or nil. */
export function storedReport(progress: unknown, log: unknown): StoredReport {
  const logText = text(log);
  return { progress: text(progress), log: logText === null ? { lines: [], dropped: 0 } : parseLog(logText) };
}

function parseLog(json: string): StoredLog {
  const { d, l } = JSON.parse(json) as { d: number; l: string[] | Record<string, never> };
  // Lua's JSON writes an empty list as an object.
  return { lines: Array.isArray(l) ? l : [], dropped: d };
}
