/** `kvmq events`: prints a queue's events live, one line each, until SIGINT/SIGTERM. */
import { EventsMissedError } from '../../model/errors.js';
import type { StoredEvent } from '../../index.js';
import { parseQueueCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_OK, UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { note, printJson, printLine } from '../output.js';
import { errorLine } from '../outcome-tally.js';
import { withClient } from '../store.js';
import { jsonOf, valueText } from '../values.js';

export const events: Command = {
  name: 'events',
  summary: "print a queue's events live (enqueued, started, completed, ...)",
  usage: commandUsage(
    'events <queue> [--from start|now|CURSOR]',
    "Prints the queue's events as they happen, one line each: time, type, message id, attempt and\n" +
      "error (a completed event's result). The queue must record them: kvmq config <queue> events=true.\n" +
      'A reader that falls behind their retention is warned on stderr and goes on from the oldest\n' +
      'event kept. Runs until SIGINT or SIGTERM (exit 0), or until stdout is closed.',
    [
      ['--from start|now|CURSOR', "where to begin: the oldest event kept, now (default), or after an event's cursor"],
      ['--json', 'one JSON object per line: type, id, at, attempt, error, progress, result, cursor'],
    ],
  ),

  async run(argv) {
    const { values, queue } = parseQueueCommandLine(argv, { from: { type: 'string' } });
    const from = values.from ?? 'now';
    const print =
      values.json === true
        ? (event: StoredEvent) => printJson(jsonOf(event))
        : (event: StoredEvent) => printLine(eventLine(event));
    const stop = new AbortController();
    const onSignal = (): void => stop.abort();
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      return await withClient(values.store, async (client) => {
        let after = from;
        for (;;) {
          try {
            for await (const event of client.events(queue, { after, signal: stop.signal })) print(event);
            return EXIT_OK;
          } catch (error) {
            if (!(error instanceof EventsMissedError)) throw asUsage(error, from);
            note(`missed events of queue '${queue}' (trimmed before they were read); going on from the oldest kept`);
            for (const event of error.events) print(event);
            after = error.cursor;
          }
        }
      });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  },
};

function eventLine(e: StoredEvent): string {
  const error = e.error === undefined ? '' : `  ${errorLine(e.error, 160)}`;
  // A result on one line, cut as an error is: the whole of it is in --json and kvmq show.
  const result = 'result' in e ? `  result ${errorLine(valueText(e.result), 160)}` : '';
  return `${new Date(e.at).toISOString()}  ${e.type.padEnd(9)}  ${e.id}  attempt ${e.attempt}${error}${result}`;
}

/** A cursor the store does not know is the command line's mistake. */
function asUsage(error: unknown, from: string): unknown {
  if (error instanceof TypeError && from !== 'start' && from !== 'now')
    return new UsageError(`--from: ${error.message}`);
  return error;
}
