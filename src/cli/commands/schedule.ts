/** `kvmq schedule add|ls|rm`: repeatable schedules kept in the store, fired by the queue's workers. */
import type { Client, ScheduleInfo, ScheduleOptions, ScheduleTiming } from '../../index.js';
import { checkScheduleName } from '../../model/scheduling.js';
import { checkCount, checkQueueName } from '../../model/validate.js';
import { CATCH_UP_MAX } from '../../schedule/body.js';
import { checkTiming } from '../../schedule/timing.js';
import {
  expectPositionals,
  optionalWholeNumber,
  parseCommandLine,
  parseFilterPairs,
  parseJsonObject,
  parseQueueCommandLine,
  parseWholeNumber,
} from '../args.js';
import type { Command } from '../command.js';
import { DURATION_HELP, optionalDuration, parseDuration } from '../duration.js';
import { EXIT_FAILURE, EXIT_OK, UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { readAll } from '../input.js';
import { note, printJson, printLine } from '../output.js';
import { parseGroup, parsePriority } from '../scheduling-args.js';
import { withClient } from '../store.js';
import { jsonOf } from '../values.js';

const ADD_OPTIONS = {
  cron: { type: 'string' },
  tz: { type: 'string' },
  every: { type: 'string' },
  priority: { type: 'string' },
  group: { type: 'string' },
  filter: { type: 'string', multiple: true },
  metadata: { type: 'string' },
  attempts: { type: 'string' },
  'backoff-ms': { type: 'string' },
  timeout: { type: 'string' },
  'catch-up': { type: 'string' },
} as const;

export const schedule: Command = {
  name: 'schedule',
  summary: 'add, list or remove repeatable schedules (cron or every N) kept in the store',
  usage: commandUsage(
    'schedule add <queue> <name> (--cron EXPR [--tz ZONE] | --every DURATION) [payload] [options]\n' +
      '       kvmq schedule ls <queue>\n' +
      '       kvmq schedule rm <queue> <name>',
    'add creates or replaces the schedule <name>: from its next slot on, each slot enqueues [payload] (or all\n' +
      'of stdin when it is not given) as the message <name>@<slot in ISO 8601>. Workers of the queue fire\n' +
      'schedules (kvmq work), each slot once however many run; after a time when none ran, the latest\n' +
      '--catch-up missed slots are enqueued. ls lists the schedules, rm removes one (exit 1 if there is none);\n' +
      'messages a schedule already enqueued stay.',
    [
      ['--cron EXPR', "a cron expression: 5 fields, 6 with seconds first, or '@hourly', '@daily', ..."],
      ['--tz ZONE', 'the IANA time zone of --cron, e.g. Europe/Berlin (default UTC); DST is followed'],
      ['--every DURATION', 'a slot every DURATION (500ms, 30s, 5m, 2h, 1d, 1h30m), aligned to the epoch'],
      ['--priority N', 'the messages’ priority, 0 (runs first, the default) to 1000'],
      ['--group G', 'the messages’ group (see the queue’s groupConcurrency)'],
      ['--filter NAME=VALUE', "a filter value from the queue's configuration (repeatable)"],
      ['--metadata JSON', 'a JSON object carried with each message'],
      ['--attempts N', "the messages' attempts (over kvmq work's --max-attempts)"],
      ['--backoff-ms T', 'wait T before each retry of a message'],
      ['--timeout T', "the messages' handler time limit"],
      ['--catch-up N', `missed slots enqueued after a downtime, latest first: 1 (default) to ${CATCH_UP_MAX}`],
      DURATION_HELP,
    ],
  ),

  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub === 'add') return add(rest);
    if (sub === 'ls' || sub === 'list') return ls(rest);
    if (sub === 'rm' || sub === 'remove') return rm(rest);
    throw new UsageError(
      sub === undefined ? 'missing subcommand: add, ls or rm' : `unknown subcommand '${sub}': use add, ls or rm`,
    );
  },
};

async function add(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, ADD_OPTIONS);
  expectPositionals(positionals, 2, 3, '<queue> <name> [payload]');
  const [queue = '', name = '', payloadText] = positionals;
  usage(() => checkQueueName(queue));
  usage(() => checkScheduleName(name));
  const timing = await timingOf(values.cron, values.tz, values.every);
  const options: ScheduleOptions = {
    priority: parsePriority(values.priority),
    group: parseGroup(values.group),
    filters: parseFilterPairs(values.filter),
    metadata: values.metadata === undefined ? undefined : parseJsonObject('--metadata', values.metadata),
    attempts: optionalWholeNumber('--attempts', values.attempts, 1),
    backoff: optionalDuration('--backoff-ms', values['backoff-ms'], 0),
    timeoutMs: optionalDuration('--timeout', values.timeout),
    catchUp:
      values['catch-up'] === undefined
        ? undefined
        : usage(() => checkCount('--catch-up', whole('--catch-up', values['catch-up']), 1, CATCH_UP_MAX)),
  };
  const given = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
  return withClient(values.store, async (client) => {
    const payload = payloadText === undefined ? await readStdin() : Buffer.from(payloadText, 'utf8');
    const result = await client.schedule(queue, name, timing, payload, given);
    if (values.json === true) printJson({ created: result.created, schedule: jsonOf(result.schedule) });
    else printLine(`${result.created ? 'created' : 'replaced'} ${lineOf(result.schedule)}`);
    return EXIT_OK;
  });
}

async function ls(argv: string[]): Promise<number> {
  const { values, queue } = parseQueueCommandLine(argv, {});
  return withClient(values.store, async (client: Client) => {
    for (const info of await client.schedules(queue)) {
      if (values.json === true) printJson(jsonOf(info));
      else printLine(lineOf(info));
    }
    return EXIT_OK;
  });
}

async function rm(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {});
  expectPositionals(positionals, 2, 2, '<queue> <name>');
  const [queue = '', name = ''] = positionals;
  usage(() => checkScheduleName(name));
  return withClient(values.store, async (client) => {
    const removed = await client.unschedule(queue, name);
    if (values.json === true) printJson({ name, removed });
    else if (removed) printLine(`removed ${name}`);
    if (!removed) note(`no schedule '${name}' in queue '${queue}'`);
    return removed ? EXIT_OK : EXIT_FAILURE;
  });
}

/** --cron [--tz] or --every, checked as the library checks them (croner for the expression and zone). */
async function timingOf(
  cron: string | undefined,
  tz: string | undefined,
  every: string | undefined,
): Promise<ScheduleTiming> {
  if ((cron === undefined) === (every === undefined))
    throw new UsageError('give either --cron EXPR or --every DURATION');
  if (every !== undefined) {
    if (tz !== undefined) throw new UsageError('--tz goes with --cron, not with --every');
    return { everyMs: parseDuration('--every', every) };
  }
  try {
    return await checkTiming(tz === undefined ? { cron } : { cron, tz });
  } catch (error) {
    throw asUsage(error);
  }
}

/** A whole-number flag, as text. */
function whole(what: string, text: string | undefined): number {
  return parseWholeNumber(what, text ?? '');
}

/** Runs a library check: its TypeError is a usage error here (exit 2), said the library's way. */
function usage<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    throw asUsage(error);
  }
}

function asUsage(error: unknown): unknown {
  return error instanceof TypeError ? new UsageError(error.message) : error;
}

async function readStdin(): Promise<Buffer> {
  if (process.stdin.isTTY) note('reading the payload from stdin; end it with Ctrl-D');
  return readAll(process.stdin);
}

function lineOf(info: ScheduleInfo): string {
  const timing =
    info.everyMs !== undefined ? `every ${info.everyMs}ms` : `cron '${info.cron ?? ''}' ${info.tz ?? 'UTC'}`;
  const group = info.group === null ? '' : `  group ${info.group}`;
  return (
    `${info.name}  ${timing}  next ${new Date(info.nextAt).toISOString()}  catch-up ${info.catchUp}` +
    `  priority ${info.priority}${group}`
  );
}
