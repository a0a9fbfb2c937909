/**
 * `kvmq retry`, `kvmq remove`, `kvmq promote`: an action on messages by id,
 * one result line each. A refusal says the message's state (exit 3); an id not
 * found says so (exit 1).
 */
import type { ActionResult, Client } from '../../index.js';
import { expectPositionals, parseCommandLine, parseQueueCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_REFUSED } from '../errors.js';
import { commandUsage } from '../help.js';
import { checkKnownQueues } from '../known-queue.js';
import { note, printJson, printLine } from '../output.js';
import { withClient } from '../store.js';

type Act = (client: Client, queue: string, id: string) => Promise<ActionResult>;

/** Exit 1 when an id was not found, else 3 when one was refused, else 0. */
export async function runActions(
  client: Client,
  queue: string,
  ids: readonly string[],
  act: Act,
  json: boolean,
): Promise<number> {
  let notFound = false;
  let refused = false;
  for (const id of ids) {
    const result = await act(client, queue, id);
    if (json) printJson(result);
    if (result.ok) {
      if (!json) printLine(`${id} ${result.state ?? 'removed'}`);
    } else if (result.state === null) {
      if (!notFound) await checkKnownQueues(client, [queue]);
      notFound = true;
      note(`message ${id} not found in queue '${queue}'`);
    } else {
      refused = true;
      note(`message ${id} was refused: it is ${result.state}`);
    }
  }
  return notFound ? EXIT_FAILURE : refused ? EXIT_REFUSED : EXIT_OK;
}

function actionCommand(name: string, summary: string, description: string, act: Act): Command {
  return {
    name,
    summary,
    usage: commandUsage(
      `${name} <queue> <id>...`,
      `${description}\nPrints '<id> <state after>' per message. Exit 1 when an id is not found, ` +
        '3 when a message was refused for its state (said on stderr).',
      [],
    ),
    async run(argv) {
      const { values, positionals } = parseCommandLine(argv, {});
      expectPositionals(positionals, 2, Infinity, '<queue> <id>...');
      const [queue = '', ...ids] = positionals;
      return withClient(values.store, (client) => runActions(client, queue, ids, act, values.json === true));
    },
  };
}

export const retry: Command = {
  ...actionCommand(
    'retry',
    'queue failed messages again (attempt 1, history kept)',
    'Queues failed messages again at attempt 1, keeping their history. With --all-failed, every failed\n' +
      'message of the queue (a redrive), printing how many.',
    (client, queue, id) => client.retry(queue, id),
  ),
  usage: commandUsage(
    'retry <queue> (<id>... | --all-failed)',
    'Queues failed messages again at attempt 1, keeping their history; other states are refused (exit 3),\n' +
      'unknown ids exit 1. With --all-failed, every failed message of the queue (a redrive); prints how many.',
    [['--all-failed', 'retry every failed message of the queue']],
  ),
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { 'all-failed': { type: 'boolean' } });
    const all = values['all-failed'] === true;
    expectPositionals(positionals, all ? 1 : 2, all ? 1 : Infinity, all ? '<queue>' : '<queue> <id>...');
    const [queue = '', ...ids] = positionals;
    return withClient(values.store, async (client) => {
      if (!all) return runActions(client, queue, ids, (c, q, id) => c.retry(q, id), values.json === true);
      const { retried } = await client.retryFailed(queue);
      if (retried === 0) await checkKnownQueues(client, [queue]);
      if (values.json === true) printJson({ retried });
      else printLine(`retried ${retried}`);
      return EXIT_OK;
    });
  },
};

export const remove: Command = actionCommand(
  'remove',
  'remove messages that are not running',
  'Removes messages in any state but locked (a running handler keeps its message: exit 3).',
  (client, queue, id) => client.remove(queue, id),
);

export const promote: Command = actionCommand(
  'promote',
  'end the backoff of waiting messages now',
  'Ends the backoff of queued-with-backoff and done-with-requeue messages: they are queued now.',
  (client, queue, id) => client.promote(queue, id),
);

function pauseCommand(name: 'pause' | 'resume'): Command {
  const paused = name === 'pause';
  return {
    name,
    summary: paused ? 'stop workers claiming from a queue' : 'let workers claim from a paused queue again',
    usage: commandUsage(
      `${name} <queue>`,
      paused
        ? 'Pauses the queue, in its configuration in the store: every worker stops claiming within one\n' +
            'wake-up (running handlers finish). Enqueues are still accepted. A queue with no configuration\n' +
            'yet gets one, and kvmq says so.'
        : 'Resumes a paused queue: idle workers are woken and claim again.',
      [],
    ),
    async run(argv) {
      const { values, queue } = parseQueueCommandLine(argv, {});
      return withClient(values.store, async (client) => {
        const result = paused ? await client.pause(queue) : await client.resume(queue);
        if (values.json === true) printJson(result);
        else if (paused) printLine(`paused ${queue}: workers claim nothing from it until 'kvmq resume ${queue}'`);
        else printLine(`resumed ${queue}: workers claim from it again`);
        if (result.created) note(`queue '${queue}' had no configuration; created it`);
        return EXIT_OK;
      });
    },
  };
}

export const pause = pauseCommand('pause');
export const resume = pauseCommand('resume');
