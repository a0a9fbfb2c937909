/**
 * `kvmq clear`: removes every message of the queues; their configuration stays. Messages are lost for
 * good, so a non-empty queue is cleared only when confirmed: y at a terminal's prompt, or --yes.
 */
import { createInterface } from 'node:readline/promises';
import type { Client } from '../../index.js';
import { expectPositionals, parseCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_FAILURE, EXIT_OK, UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { checkKnownQueues } from '../known-queue.js';
import { note, printJson, printLine } from '../output.js';
import { countOf } from '../progress.js';
import { withClient } from '../store.js';

export const clear: Command = {
  name: 'clear',
  summary: 'remove every message of one or more queues',
  usage: commandUsage(
    'clear <queue>... [--yes]',
    'Removes every message of the queues, whatever its state. Their configuration stays. Prints how many\n' +
      'messages each queue held just before. A queue with messages is cleared only when confirmed: at a\n' +
      'terminal kvmq asks (y/N; no clears nothing, exit 1); elsewhere --yes is needed (without it: exit 2).',
    [['-y, --yes', 'clear without asking']],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { yes: { type: 'boolean', short: 'y' } });
    expectPositionals(positionals, 1, Infinity, '<queue>...');
    const queues = [...new Set(positionals)];
    return withClient(values.store, async (client) => {
      await checkKnownQueues(client, queues);
      const held = await countMessages(client, queues);
      const total = [...held.values()].reduce((sum, n) => sum + n, 0);
      if (total > 0 && values.yes !== true && !(await confirmed(held))) {
        note('nothing cleared');
        return EXIT_FAILURE;
      }
      await client.clear(...queues);
      if (values.json === true) printJson({ cleared: queues, removed: Object.fromEntries(held) });
      else for (const [queue, n] of held) printLine(`cleared ${queue}: removed ${countOf(n, 'message')}`);
      return EXIT_OK;
    });
  },
};

/** What each queue holds now: what clearing it removes (bar messages enqueued in between). */
async function countMessages(client: Client, queues: readonly string[]): Promise<Map<string, number>> {
  const held = new Map<string, number>();
  for (const queue of queues) held.set(queue, (await client.queueStatus(queue)).total);
  return held;
}

/** Asks at a terminal; anywhere else there is no one to ask, and --yes must say it. */
async function confirmed(held: ReadonlyMap<string, number>): Promise<boolean> {
  const what = [...held]
    .filter(([, n]) => n > 0)
    .map(([queue, n]) => `${countOf(n, 'message')} of ${queue}`)
    .join(', ');
  if (!process.stdin.isTTY || !process.stderr.isTTY) {
    throw new UsageError(`clear would remove ${what}; not at a terminal to ask, so give --yes to confirm`);
  }
  const prompt = createInterface({ input: process.stdin, output: process.stderr, terminal: false });
  try {
    const answer = await prompt.question(`kvmq: remove ${what} for good? [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    prompt.close();
  }
}
