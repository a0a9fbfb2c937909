/** Commands that read one message, `<queue> <id>`, and print what they found: `kvmq show`, `kvmq flow show`. */
import type { Client } from '../index.js';
import { expectPositionals, parseCommandLine } from './args.js';
import { EXIT_OK } from './errors.js';
import { messageNotFound } from './known-queue.js';
import { printJson, printLine } from './output.js';
import { withClient } from './store.js';

/** What `read` finds, printed as `text` or, with --json, as `json`; not found is said as such (exit 1). */
export async function printOneMessage<T>(
  argv: string[],
  read: (client: Client, queue: string, id: string) => Promise<T | null>,
  print: { readonly text: (found: T) => string; readonly json: (found: T) => unknown },
): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {});
  expectPositionals(positionals, 2, 2, '<queue> <id>');
  const [queue = '', id = ''] = positionals;
  return withClient(values.store, async (client) => {
    const found = await read(client, queue, id);
    if (found === null) return messageNotFound(client, queue, id, values.json === true);
    if (values.json === true) printJson(print.json(found));
    else printLine(print.text(found));
    return EXIT_OK;
  });
}
