/** `kvmq status`: a message's state, or a queue's counts and consumers. */
import type { MessageStatus, QueueStatus } from '../../index.js';
import { MESSAGE_STATES } from '../../model/types.js';
import { parseQueueCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_OK } from '../errors.js';
import { commandUsage } from '../help.js';
import { checkKnownQueues, messageNotFound } from '../known-queue.js';
import { printJson, printLine, table } from '../output.js';
import { countOf } from '../progress.js';
import { jsonOf, valueText } from '../values.js';
import { withClient } from '../store.js';

const OPTIONS = {
  id: { type: 'string' },
} as const;

export const status: Command = {
  name: 'status',
  summary: "show a queue's counts and consumers, or one message's state",
  usage: commandUsage(
    'status <queue> [--id ID]',
    'Shows how many messages the queue holds in each state, its live consumers and what each holds.\n' +
      "'Empty polls in a row' counts the claims that found nothing since one last took a message (--json:\n" +
      "dryRuns); it sets how long idle workers wait before the next one (the queue's end-of-queue backoff).\n" +
      'With --id, shows that message instead (exit 1 when it is not found).',
    [['--id ID', 'show this message']],
  ),

  async run(argv) {
    const { values, queue } = parseQueueCommandLine(argv, OPTIONS);
    const json = values.json === true;
    const id = values.id;
    return withClient(values.store, async (client) => {
      if (id === undefined) {
        const result = await client.queueStatus(queue);
        if (result.total === 0 && result.consumers.length === 0) await checkKnownQueues(client, [queue]);
        if (json) {
          const { counts, consumers, dryRuns, total, paused } = result;
          printJson({ counts, consumers, dryRuns, total, paused });
        } else printLine(queueText(result));
        return EXIT_OK;
      }
      const result = await client.status(queue, id);
      if (result === null) return messageNotFound(client, queue, id, json);
      // The state first: it is what a reader (or `jq .state`) looks for.
      if (json) {
        const { state, ...rest } = jsonOf(result);
        printJson({ state, ...rest });
      } else printLine(messageText(result));
      return EXIT_OK;
    });
  },
};

function messageText(m: MessageStatus): string {
  return table([...statusRows(m), lastErrorRow(m)]);
}

/** A message's status as label/value rows, shared with `kvmq show`. */
export function statusRows(m: MessageStatus): [string, string][] {
  return [
    ['queue', m.queue],
    ['id', m.id],
    ['state', m.state],
    ['attempt', String(m.attempt)],
    ['outcome', m.outcome ?? '-'],
    ['enqueued', time(m.enqueuedAt)],
    ['updated', time(m.updatedAt)],
    ['consumer', m.consumer ?? '-'],
    ['until', m.until === null ? '-' : time(m.until)],
    // What the handler returned with its success; '-' for none (a JSON null shows as null).
    ['result', 'result' in m ? valueText(m.result) : '-'],
  ];
}

/** Shown last: it may span lines (a command's stderr). */
export function lastErrorRow(m: MessageStatus): [string, string] {
  return ['last error', m.lastError === null ? '-' : m.lastError.replaceAll('\n', '\n            ')];
}

function queueText(q: QueueStatus): string {
  const lines = [
    `queue ${q.queue}${q.paused ? ' (paused)' : ''}: ${countOf(q.total, 'message')}, ${q.dryRuns} empty polls in a row`,
    table(
      MESSAGE_STATES.map((state) => [state, String(q.counts[state])]),
      '  ',
    ),
    `consumers: ${q.consumers.length}`,
  ];
  for (const c of q.consumers) {
    const holding = c.holding.length === 0 ? 'holding nothing' : `holding ${c.holding.join(', ')}`;
    lines.push(`  ${c.id}  pid ${c.pid} on ${c.host}, since ${time(c.startedAt)}, ${holding}`);
  }
  return lines.join('\n');
}

function time(ms: number): string {
  return new Date(ms).toISOString();
}
