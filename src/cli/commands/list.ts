/** `kvmq list`: a queue's messages by state, a page at a time (or all pages with --all). */
import type { ListedMessage, ListOptions, MessageState, Outcome } from '../../index.js';
import { optionalWholeNumber, parseQueueCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_OK, UsageError } from '../errors.js';
import { labelWord, STATE_LABELS, STATE_WORDS, stateOfWord } from '../../model/state-labels.js';
import { MESSAGE_STATES } from '../../model/types.js';
import { commandUsage } from '../help.js';
import { checkKnownQueues } from '../known-queue.js';
import { note, printJson, printLine } from '../output.js';
import { errorLine } from '../outcome-tally.js';
import { withClient } from '../store.js';
import { jsonOf, valueText } from '../values.js';
import { didYouMean } from '../suggest.js';

const OPTIONS = {
  state: { type: 'string', multiple: true },
  outcome: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean' },
  payload: { type: 'boolean' },
} as const;

export const list: Command = {
  name: 'list',
  summary: "list a queue's messages by state",
  usage: commandUsage(
    'list <queue> [--state S]... [--outcome O] [--limit N] [--cursor C | --all] [--payload]',
    'Lists messages, oldest first within each state: one line each with id, state, attempt, last\n' +
      "update and last error. When more remain, the next page's --cursor is said on stderr.\n" +
      'States (and the names the dashboard shows them by): queued (queued), queued-with-backoff (delayed),\n' +
      'locked (running), locked-with-requeue (running-requeue), done-awaiting-gc (done), done-with-backoff\n' +
      '(done-held), done-with-requeue (done-requeue), failed (failed). --json prints one JSON object per message.',
    [
      ['--state S', "only this state, by name or the dashboard's (repeatable; default: every state)"],
      ['--outcome O', 'only messages whose last outcome is O (success, error, retry)'],
      ['--limit N', 'messages per page, 1 to 1000 (default 100)'],
      ['--cursor C', 'the page after the one that printed this cursor'],
      ['--all', 'every page, to the end'],
      ['--payload', "include each message's result (and with --json payload, metadata and filters)"],
    ],
  ),

  async run(argv) {
    const { values, queue } = parseQueueCommandLine(argv, OPTIONS);
    const json = values.json === true;
    const states = values.state?.map(stateArgument);
    const limit = optionalWholeNumber('--limit', values.limit);
    const base: ListOptions = {
      ...(states === undefined ? {} : { states }),
      ...(values.outcome === undefined ? {} : { outcome: values.outcome as Outcome }),
      ...(limit === undefined ? {} : { limit }),
      ...(values.payload === true ? { payload: true } : {}),
    };
    return withClient(values.store, async (client) => {
      let cursor = values.cursor ?? null;
      do {
        const page = await client.list(queue, cursor === null ? base : { ...base, cursor });
        if (page.messages.length === 0 && cursor === null) await checkKnownQueues(client, [queue]);
        for (const message of page.messages) {
          if (json) printJson(jsonOf(message));
          else printLine(lineOf(message));
        }
        cursor = page.cursor;
      } while (values.all === true && cursor !== null);
      if (cursor !== null) note(`more: kvmq list ${queue} ... --cursor ${cursor}`);
      return EXIT_OK;
    });
  },
};

/** A state's name or its dashboard label; a typo is a usage error (exit 2) like any other. */
function stateArgument(text: string): MessageState {
  const state = stateOfWord(text);
  if (state !== null) return state;
  throw new UsageError(
    `state "${text}" is not one of ${MESSAGE_STATES.join(', ')}${didYouMean(text, STATE_WORDS)}; ` +
      `the dashboard's names work too: ${MESSAGE_STATES.map((s) => labelWord(STATE_LABELS[s])).join(', ')}`,
  );
}

function lineOf(m: ListedMessage): string {
  const error = m.lastError === null ? '' : `  ${errorLine(m.lastError, 120)}`;
  // With --payload: the handler's result, cut to a line.
  const result = 'result' in m ? `  result ${errorLine(valueText(m.result), 120)}` : '';
  return `${m.id}  ${m.state}  attempt ${m.attempt}  ${new Date(m.updatedAt).toISOString()}${result}${error}`;
}
