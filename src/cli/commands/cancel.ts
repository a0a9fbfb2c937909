/**
 * `kvmq cancel`: fails waiting, delayed or running messages at once with `canceled` (and --reason); a running
 * handler is told to stop. One result line each, as the other actions print them.
 */
import { MessageGoneError } from '../../model/errors.js';
import type { ActionResult, Client } from '../../index.js';
import { expectPositionals, parseCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { commandUsage } from '../help.js';
import { withClient } from '../store.js';
import { runActions } from './actions.js';

/** An unknown id is a refusal with no state here, as runActions reports one (exit 1). */
async function cancelOne(client: Client, queue: string, id: string, reason: string | undefined): Promise<ActionResult> {
  try {
    return await client.cancel(queue, id, reason);
  } catch (error) {
    if (error instanceof MessageGoneError) return { ok: false, id, state: null };
    throw error;
  }
}

export const cancel: Command = {
  name: 'cancel',
  summary: 'fail waiting, delayed or running messages now (a running handler is told to stop)',
  usage: commandUsage(
    'cancel <queue> <id>... [--reason TEXT]',
    "Fails messages that have not finished with the error 'canceled' (and the reason): waiting and delayed\n" +
      "ones never run, a running handler's job.signal is aborted and what it returns is not kept. With a\n" +
      "dead-letter queue configured they move there, as a final failure does. Prints '<id> <state after>'\n" +
      "per message ('removed' once moved). Exit 1 when an id is not found, 3 when a message had finished\n" +
      '(its state said on stderr).',
    [['--reason TEXT', "kept after 'canceled: ' as the message's error"]],
  ),
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { reason: { type: 'string' } });
    expectPositionals(positionals, 2, Infinity, '<queue> <id>...');
    const [queue = '', ...ids] = positionals;
    const reason = values.reason;
    return withClient(values.store, (client) =>
      runActions(client, queue, ids, (c, q, id) => cancelOne(c, q, id, reason), values.json === true),
    );
  },
};
