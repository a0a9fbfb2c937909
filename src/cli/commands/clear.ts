/** `kvmq clear`: removes every message of the queues; their configuration stays. */
import { expectPositionals, parseCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_OK } from '../errors.js';
import { commandUsage } from '../help.js';
import { printJson } from '../output.js';
import { withClient } from '../store.js';

export const clear: Command = {
  name: 'clear',
  summary: 'remove every message of one or more queues',
  usage: commandUsage(
    'clear <queue>...',
    'Removes every message of the queues, whatever its state. Their configuration stays.',
    [],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, {});
    expectPositionals(positionals, 1, Infinity, '<queue>...');
    return withClient(values.store, async (client) => {
      await client.clear(...positionals);
      if (values.json === true) printJson({ cleared: positionals });
      return EXIT_OK;
    });
  },
};
