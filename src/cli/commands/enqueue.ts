/** `kvmq enqueue`: one message from an argument or stdin, or one per line of a file. */
import { createReadStream, statSync } from 'node:fs';
import { PayloadTooLargeError } from '../../model/errors.js';
import type { BatchItem, Client, EnqueueOptions, EnqueueResult, MessageState } from '../../index.js';
import {
  expectPositionals,
  optionalWholeNumber,
  parseCommandLine,
  parseFilterPairs,
  parseJsonObject,
} from '../args.js';
import type { Command } from '../command.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_REFUSED, InputTooLargeError, reportError, UsageError } from '../errors.js';
import { DURATION_HELP, optionalDuration } from '../duration.js';
import { commandUsage } from '../help.js';
import { readAll, readLines } from '../input.js';
import { note, printJson, printLine } from '../output.js';
import { Progress } from '../progress.js';
import { parseDebounce, parseGroup, parsePriority, parseRunAt } from '../scheduling-args.js';
import { withClient } from '../store.js';

const OPTIONS = {
  id: { type: 'string' },
  filter: { type: 'string', multiple: true },
  'delay-ms': { type: 'string' },
  metadata: { type: 'string' },
  'allow-requeue': { type: 'boolean' },
  attempts: { type: 'string' },
  'backoff-ms': { type: 'string' },
  timeout: { type: 'string' },
  'expire-after': { type: 'string' },
  priority: { type: 'string' },
  lifo: { type: 'boolean' },
  'run-at': { type: 'string' },
  group: { type: 'string' },
  debounce: { type: 'string' },
  'debounce-ms': { type: 'string' },
  file: { type: 'string' },
} as const;

// Lines per enqueueBatch call: few round trips, bounded memory.
const CHUNK = 1000;

export const enqueue: Command = {
  name: 'enqueue',
  summary: 'add a message (from an argument, stdin, or one per line of a file)',
  usage: commandUsage(
    'enqueue <queue> [payload] [options]',
    'Adds a message whose payload is the bytes of [payload], or all of stdin when it is not given.\n' +
      'Prints the id of each message added. A message whose id exists is refused (exit 3).\n' +
      'With --debounce, a waiting message of the same debounce id takes the new payload instead, and its\n' +
      'id is printed (--json: action "debounced"). --delay-ms, --run-at and --debounce exclude each other.',
    [
      ['--id ID', 'the message id (default: random); an id that exists is refused'],
      ['--filter NAME=VALUE', "a filter value from the queue's configuration (repeatable)"],
      ['--priority N', 'lower runs first: 0 (the default, runs first) to 1000 (runs last)'],
      ['--lifo', 'newest first within its priority (with --file: the last line first); not with a delay'],
      ['--delay-ms T', 'keep the message back T before a worker may take it'],
      ['--run-at TIME', 'keep it back until TIME: ISO 8601 (2030-01-02T03:04:05Z) or ms since the epoch'],
      ['--group NAME', "its group: at most the queue's group_concurrency of one group run at once"],
      ['--debounce ID', 'replace the waiting message of debounce id ID, if any (needs --debounce-ms)'],
      ['--debounce-ms T', 'with --debounce: run T after the last enqueue of that id'],
      ['--metadata JSON', 'a JSON object carried with the message'],
      ['--allow-requeue', 'if the id is locked or done-with-backoff, queue it again when done'],
      ['--attempts N', "this message's attempts (over kvmq work's --max-attempts)"],
      ['--backoff-ms T', 'wait T before each retry of this message'],
      ['--timeout T', "this message's handler time limit (over the worker's --timeout)"],
      ['--expire-after T', 'its time to live: not started by a worker within T, it fails as expired'],
      ['--file F', "one message per line of F ('-' = stdin), empty lines skipped; prints a summary"],
      DURATION_HELP,
    ],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS);
    expectPositionals(positionals, 1, 2, '<queue> [payload]');
    const [queue = '', payloadText] = positionals;
    const options: EnqueueOptions = {
      filters: parseFilterPairs(values.filter),
      metadata: values.metadata === undefined ? undefined : parseJsonObject('--metadata', values.metadata),
      allowRequeue: values['allow-requeue'],
      attempts: optionalWholeNumber('--attempts', values.attempts, 1),
      backoff: optionalDuration('--backoff-ms', values['backoff-ms'], 0),
      timeoutMs: optionalDuration('--timeout', values.timeout),
      expireAfterMs: optionalDuration('--expire-after', values['expire-after']),
      priority: parsePriority(values.priority),
      lifo: values.lifo,
      group: parseGroup(values.group),
      ...readyTime(values),
    };
    const json = values.json === true;
    const file = values.file;
    if (file !== undefined) {
      if (payloadText !== undefined) throw new UsageError('give a payload or --file, not both');
      if (values.id !== undefined)
        throw new UsageError('--id cannot be used with --file: each line is a message of its own');
      const size = file === '-' ? null : regularFileSize(file);
      return withClient(values.store, (client) => enqueueLines(client, queue, file, size, options, json));
    }
    return withClient(values.store, async (client) => {
      const payload = payloadText === undefined ? await readStdin() : Buffer.from(payloadText, 'utf8');
      const result = await client.enqueue(queue, payload, { ...options, id: values.id });
      if (json)
        printJson(
          result.ok
            ? { id: result.id, ok: true, action: result.action }
            : { id: result.id, ok: false, state: result.state },
        );
      else if (result.ok) printLine(result.id);
      return result.ok ? EXIT_OK : refused(result.id, result.state);
    });
  },
};

/** When the message becomes ready: --delay-ms, --run-at or --debounce, at most one of them. */
function readyTime(values: {
  lifo?: boolean;
  'delay-ms'?: string;
  'run-at'?: string;
  debounce?: string;
  'debounce-ms'?: string;
}): Pick<EnqueueOptions, 'initialBackoffMs' | 'runAt' | 'debounce'> {
  const flags = { '--delay-ms': values['delay-ms'], '--run-at': values['run-at'], '--debounce': values.debounce };
  const given = Object.entries(flags).filter(([, value]) => value !== undefined);
  if (values.lifo === true && given[0] !== undefined) {
    throw new UsageError(`--lifo is for a message ready at once, not with ${given[0][0]}`);
  }
  if (given.length > 1) {
    throw new UsageError(
      `give at most one of --delay-ms, --run-at and --debounce, not ${given.map(([flag]) => flag).join(' and ')}`,
    );
  }
  return {
    initialBackoffMs: optionalDuration('--delay-ms', values['delay-ms'], 0),
    runAt: parseRunAt(values['run-at']),
    debounce: parseDebounce(values.debounce, values['debounce-ms']),
  };
}

async function readStdin(): Promise<Buffer> {
  if (process.stdin.isTTY) note('reading the payload from stdin; end it with Ctrl-D');
  return readAll(process.stdin);
}

/** The file's size for the progress bar, or null when it is not a regular file (a pipe, /dev/stdin). */
function regularFileSize(file: string): number | null {
  const stat = statSync(file);
  return stat.isFile() ? stat.size : null;
}

function refused(id: string, state: MessageState): number {
  note(`message ${id} was refused: it is ${state}`);
  return EXIT_REFUSED;
}

/** `--file`: batches of lines, a progress bar on a terminal, a summary at the end. */
async function enqueueLines(
  client: Client,
  queue: string,
  file: string,
  size: number | null,
  options: EnqueueOptions,
  json: boolean,
): Promise<number> {
  const progress = process.stderr.isTTY ? new Progress({ label: 'enqueue', total: size, mode: 'bar' }) : null;
  const refusals: { id: string; state: MessageState }[] = [];
  let accepted = 0;
  let bytesRead = 0;
  let lineNumber = 0;
  let batch: BatchItem[] = [];
  // The line number of each of the batch's messages, to name the line a refusal comes from.
  let batchLines: number[] = [];
  let batchFirstLine = 1;

  const send = async (): Promise<void> => {
    const results: EnqueueResult[] = await client.enqueueBatch(queue, batch);
    for (const result of results) {
      if (result.ok) accepted += 1;
      else refusals.push({ id: result.id, state: result.state });
    }
    batch = [];
    batchLines = [];
    batchFirstLine = lineNumber + 1;
    progress?.update(bytesRead, accepted + refusals.length);
  };

  try {
    const source = file === '-' ? process.stdin : createReadStream(file);
    for await (const line of readLines(source, (bytes) => (bytesRead += bytes))) {
      lineNumber += 1;
      if (line.length === 0) continue;
      batch.push({ ...options, payload: line });
      batchLines.push(lineNumber);
      if (batch.length >= CHUNK) await send();
    }
    if (batch.length > 0) await send();
  } catch (error) {
    progress?.finish();
    // A line too long to read is the one after the last read.
    const line = error instanceof InputTooLargeError ? lineNumber + 1 : lineOf(error, batch, batchLines);
    // A line's own refusal is a runtime error (exit 1) that names the line; anything else is said as usual.
    if (line !== null) note(`line ${line}: ${(error as Error).message}`);
    const code = line === null ? reportError(error, 'enqueue') : EXIT_FAILURE;
    const where = line === null ? `lines ${batchFirstLine}-${lineNumber}` : `line ${line}`;
    const added =
      accepted === 0 ? 'nothing was added' : `the ${accepted} messages before line ${batchFirstLine} were added`;
    note(`stopped at ${where}: ${added}, none from line ${batchFirstLine} on`);
    return code;
  }
  progress?.finish();

  if (json) printJson({ accepted, refused: refusals.length, refusals });
  else printLine(`accepted ${accepted}, refused ${refusals.length}`);
  for (const { id, state } of refusals) refused(id, state);
  return refusals.length > 0 ? EXIT_REFUSED : EXIT_OK;
}

/** The line whose message a batch was refused for (a payload over the store's limit), or null. */
function lineOf(error: unknown, batch: readonly BatchItem[], lines: readonly number[]): number | null {
  if (!(error instanceof PayloadTooLargeError)) return null;
  const index = batch.findIndex((item) => (item.payload as Buffer).byteLength > error.limit);
  return lines[index] ?? null;
}
