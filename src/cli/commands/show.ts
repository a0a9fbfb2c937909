/** `kvmq show`: everything kept about one message (payload, metadata, filters, policy, history, progress, log). */
import type { AttemptRecord, MessageDetails } from '../../index.js';
import type { Command } from '../command.js';
import { commandUsage } from '../help.js';
import { printOneMessage } from '../one-message.js';
import { table } from '../output.js';
import { errorLine } from '../outcome-tally.js';
import { jsonOf, valueText } from '../values.js';
import { lastErrorRow, statusRows } from './status.js';

export const show: Command = {
  name: 'show',
  summary: 'show one message: payload, result, metadata, filters, priority, history, progress, log',
  usage: commandUsage(
    'show <queue> <id>',
    "Shows a message with its payload, its handler's result, metadata, filters, retry policy, priority, group,\n" +
      "the history of its attempts that did not simply succeed, and its handlers' latest progress and log.\n" +
      'Exit 1 when it is not found.',
    [],
  ),

  run(argv) {
    return printOneMessage(argv, (client, queue, id) => client.show(queue, id), { text: detailsText, json: jsonOf });
  },
};

function detailsText(m: MessageDetails): string {
  const rows: [string, string][] = [
    ...statusRows(m),
    ['metadata', JSON.stringify(m.metadata)],
    ['filters', JSON.stringify(m.filters)],
    ['policy', JSON.stringify(m.policy)],
    ['priority', String(m.priority)],
    ['group', m.group ?? '-'],
    ['payload', valueText(m.payload)],
    lastErrorRow(m),
    ['progress', m.progress === null ? '-' : JSON.stringify(m.progress)],
  ];
  const history = m.history.length === 0 ? ['history     -'] : ['history', ...m.history.map(recordLine)];
  return [table(rows), ...history, ...logLines(m)].join('\n');
}

/** The handlers' log, oldest line first, after a note of the lines dropped to keep it bounded. */
function logLines(m: MessageDetails): string[] {
  if (m.log.length === 0 && m.logDropped === 0) return ['log         -'];
  const dropped = m.logDropped === 0 ? [] : [`  (${m.logDropped} older line(s) dropped)`];
  return ['log', ...dropped, ...m.log.map((line) => `  ${line}`)];
}

function recordLine(r: AttemptRecord): string {
  const started = r.startedAt === null ? '' : ` started ${time(r.startedAt)}`;
  const error = r.error === null ? '' : `: ${errorLine(r.error, 160)}`;
  return `  attempt ${r.attempt} ${r.outcome} at ${time(r.endedAt)}${started} by ${r.consumer ?? '-'}${error}`;
}

function time(ms: number): string {
  return new Date(ms).toISOString();
}
