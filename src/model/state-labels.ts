/**
 * The states' short names, as the dashboard shows them ("Delayed", "Done"), and reading them back: the
 * CLI takes either a state's own name or its short name, so what a user sees on one screen works on the other.
 */
import { MESSAGE_STATES, type MessageState } from './types.js';

/** Short labels for the nine states, in the order a message usually moves. */
export const STATE_LABELS: Readonly<Record<MessageState, string>> = {
  queued: 'Queued',
  'queued-with-backoff': 'Delayed',
  locked: 'Running',
  'locked-with-requeue': 'Running, requeue',
  'done-awaiting-gc': 'Done',
  'done-with-backoff': 'Done, held',
  'done-with-requeue': 'Done, requeue',
  failed: 'Failed',
  'waiting-children': 'Awaiting children',
};

/** 'Running, requeue' → 'running-requeue': a label as one word, the way it is typed on a command line. */
export function labelWord(label: string): string {
  return label
    .toLowerCase()
    .split(/[\s,_-]+/)
    .filter((part) => part !== '')
    .join('-');
}

const BY_WORD: ReadonlyMap<string, MessageState> = new Map(
  MESSAGE_STATES.flatMap((state) => [
    [state, state],
    [labelWord(STATE_LABELS[state]), state],
  ]),
);

/** Every word `stateOfWord` takes: the states' names, then the dashboard's. */
export const STATE_WORDS: readonly string[] = [...BY_WORD.keys()];

/** The state a name or a dashboard label stands for (any case, `Done, held` or `done-held`); null if none. */
export function stateOfWord(word: string): MessageState | null {
  return BY_WORD.get(labelWord(word)) ?? null;
}
