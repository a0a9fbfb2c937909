/**
 * `kvmq update`: changes a waiting or delayed message's payload, priority, ready time or filters. One result line,
 * as the other actions print them.
 */
import { createReadStream } from 'node:fs';
import { MessageGoneError } from '../../model/errors.js';
import type { ActionResult, Client, UpdateOptions } from '../../index.js';
import { expectPositionals, parseCommandLine, parseFilterPairs } from '../args.js';
import type { Command } from '../command.js';
import { DURATION_HELP, optionalDuration } from '../duration.js';
import { UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { readAll } from '../input.js';
import { parsePriority, parseRunAt } from '../scheduling-args.js';
import { withClient } from '../store.js';
import { runActions } from './actions.js';

const OPTIONS = {
  payload: { type: 'string' },
  'payload-file': { type: 'string' },
  priority: { type: 'string' },
  'run-at': { type: 'string' },
  'delay-ms': { type: 'string' },
  filter: { type: 'string', multiple: true },
} as const;

/** An unknown id is a refusal with no state here, as runActions reports one (exit 1). */
async function updateOne(client: Client, queue: string, id: string, changes: UpdateOptions): Promise<ActionResult> {
  try {
    return await client.update(queue, id, changes);
  } catch (error) {
    if (error instanceof MessageGoneError) return { ok: false, id, state: null };
    throw error;
  }
}

export const update: Command = {
  name: 'update',
  summary: "change a waiting message's payload, priority, ready time or filters",
  usage: commandUsage(
    'update <queue> <id> [--payload TEXT | --payload-file F] [--priority N] [--run-at TIME | --delay-ms T]\n' +
      '       [--filter NAME=VALUE]...',
    'Changes a message that waits (queued or delayed), in one step a worker sees whole: it runs with the old\n' +
      'content or the new, never a mix. Its id, attempts, history and enqueue time stay. Prints\n' +
      "'<id> <state after>'. Exit 1 when the id is not found, 3 when the message is running or finished\n" +
      '(its state said on stderr).',
    [
      ['--payload TEXT', 'the new payload: the bytes of TEXT, as kvmq enqueue takes its payload'],
      ['--payload-file F', "the new payload: the bytes of file F ('-' = stdin)"],
      ['--priority N', 'lower runs first: 0 (runs first) to 1000 (runs last)'],
      ['--run-at TIME', 'ready at TIME (ISO 8601 or ms since the epoch); a past time runs it now'],
      ['--delay-ms T', 'ready T from now (0: now)'],
      ['--filter NAME=VALUE', "its filter values, all of them, from the queue's configuration (repeatable)"],
      DURATION_HELP,
    ],
  ),
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS);
    expectPositionals(positionals, 2, 2, '<queue> <id>');
    const [queue = '', id = ''] = positionals;
    if (values.payload !== undefined && values['payload-file'] !== undefined)
      throw new UsageError('give --payload or --payload-file, not both');
    if (values['run-at'] !== undefined && values['delay-ms'] !== undefined)
      throw new UsageError('give --run-at or --delay-ms, not both');
    const changes: UpdateOptions = {
      ...(values.filter === undefined ? {} : { filters: parseFilterPairs(values.filter) }),
      ...(values.priority === undefined ? {} : { priority: parsePriority(values.priority) }),
      ...(values['run-at'] === undefined ? {} : { runAt: parseRunAt(values['run-at']) }),
      ...(values['delay-ms'] === undefined ? {} : { delayMs: optionalDuration('--delay-ms', values['delay-ms'], 0) }),
    };
    const payload = await readPayload(values.payload, values['payload-file']);
    const all = payload === undefined ? changes : { ...changes, payload };
    if (Object.keys(all).length === 0)
      throw new UsageError(
        'give something to change: --payload, --payload-file, --priority, --run-at, --delay-ms or --filter',
      );
    return withClient(values.store, (client) =>
      runActions(client, queue, [id], (c, q, i) => updateOne(c, q, i, all), values.json === true),
    );
  },
};

async function readPayload(text: string | undefined, file: string | undefined): Promise<Buffer | undefined> {
  if (text !== undefined) return Buffer.from(text, 'utf8');
  if (file === undefined) return undefined;
  return file === '-' ? readAll(process.stdin) : readAll(createReadStream(file), file);
}
