/** `kvmq wait`: waits until a message completes or fails for good; the exit code says which. */
import { KvmqError } from '../../model/errors.js';
import type { WaitResult } from '../../index.js';
import { expectPositionals, parseCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { DURATION_HELP, optionalDuration } from '../duration.js';
import { EXIT_FAILURE, EXIT_OK } from '../errors.js';
import { commandUsage } from '../help.js';
import { note, printJson, printLine } from '../output.js';
import { errorLine } from '../outcome-tally.js';
import { withClient } from '../store.js';

/** The wait ended without an outcome. */
export const EXIT_TIMEOUT = 3;
/** The message is not in the queue. */
export const EXIT_GONE = 4;

export const wait: Command = {
  name: 'wait',
  summary: 'wait until a message completes or fails',
  usage: commandUsage(
    'wait <queue> <id> [--timeout T]',
    'Waits until the message completes or fails for good, prints how it ended, and exits 0 when it\n' +
      'completed, 1 when it failed, 2 on a usage mistake, 3 on timeout, 4 when the message is not in\n' +
      'the queue (never enqueued, removed, or already garbage-collected).',
    [['--timeout T', 'give up after T (default 30s)'], DURATION_HELP],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { timeout: { type: 'string' } });
    expectPositionals(positionals, 2, 2, '<queue> <id>');
    const [queue = '', id = ''] = positionals;
    const timeoutMs = optionalDuration('--timeout', values.timeout);
    return withClient(
      values.store,
      async (client) => {
        try {
          const result = await client.waitFor(queue, id, timeoutMs === undefined ? {} : { timeoutMs });
          if (values.json === true) printJson(result);
          else printLine(resultLine(id, result));
          return result.outcome === 'completed' ? EXIT_OK : EXIT_FAILURE;
        } catch (error) {
          if (!(error instanceof KvmqError) || (error.code !== 'TIMEOUT' && error.code !== 'MESSAGE_GONE')) throw error;
          if (values.json === true) printJson({ outcome: null, code: error.code });
          note(error.message);
          return error.code === 'TIMEOUT' ? EXIT_TIMEOUT : EXIT_GONE;
        }
      },
      { maintenance: false },
    );
  },
};

function resultLine(id: string, r: WaitResult): string {
  const error = r.error === null ? '' : `: ${errorLine(r.error, 160)}`;
  return `${r.outcome} ${id} attempt ${r.attempt}${error}`;
}
