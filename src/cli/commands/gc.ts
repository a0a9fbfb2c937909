/** `kvmq gc`: runs the queue's GC now and prints how many finished messages it removed. */
import { parseQueueCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_OK } from '../errors.js';
import { commandUsage } from '../help.js';
import { checkKnownQueues } from '../known-queue.js';
import { note, printJson, printLine } from '../output.js';
import { countOf } from '../progress.js';
import { withClient } from '../store.js';

export const gc: Command = {
  name: 'gc',
  summary: 'remove finished messages past their GC lifetime now',
  usage: commandUsage(
    'gc <queue>',
    "Removes the queue's finished messages older than its gc_lifetime_ms, and lapsed consumers,\n" +
      'without waiting for gc_interval_ms. Prints how many finished (done or failed) messages it removed.',
    [],
  ),

  async run(argv) {
    const { values, queue } = parseQueueCommandLine(argv, {});
    return withClient(values.store, async (client) => {
      const result = await client.gc(queue);
      if (result.ran && result.removed === 0) await checkKnownQueues(client, [queue]);
      if (values.json === true) printJson(result);
      else {
        const n = result.removed;
        printLine(`removed ${countOf(n, 'finished message')} of ${queue}`);
        if (!result.ran) note(`another GC of queue ${queue} was running; this one did nothing`);
      }
      return EXIT_OK;
    });
  },
};
