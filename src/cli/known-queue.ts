/**
 * Commands that read or change what a queue holds refuse a queue nobody has used: a typo would otherwise
 * show as an empty queue and exit 0.
 */
import type { Client } from '../index.js';
import { EXIT_FAILURE, UnknownQueueError } from './errors.js';
import { note, printJson } from './output.js';
import { didYouMean } from './suggest.js';

// More known names than this are not listed in the message.
const LISTED_MAX = 10;

/** Known: it has a configuration or messages (client.queues()), or a live consumer waiting on it. */
export async function checkKnownQueues(client: Client, queues: readonly string[]): Promise<void> {
  let known: string[] | null = null;
  for (const queue of queues) {
    known ??= await client.queues();
    if (known.includes(queue) || (await client.queueStatus(queue)).consumers.length > 0) continue;
    const listed =
      known.length === 0
        ? '; this store has no queues yet'
        : known.length <= LISTED_MAX
          ? `; known: ${known.join(', ')}`
          : '';
    throw new UnknownQueueError(
      `unknown queue '${queue}': no messages, configuration or consumers${didYouMean(queue, known)}${listed}`,
    );
  }
}

/** A message not found: an unknown queue is refused as above; otherwise it says so (`{"state":null}`), exit 1. */
export async function messageNotFound(client: Client, queue: string, id: string, json: boolean): Promise<number> {
  await checkKnownQueues(client, [queue]);
  if (json) printJson({ state: null });
  else note(`message ${id} not found in queue '${queue}'`);
  return EXIT_FAILURE;
}
