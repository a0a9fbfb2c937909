/**
 * What an action did, carried to the page it redirects to as a fixed code (never free text, so a link
 * cannot make the dashboard say something it did not).
 */
import { MESSAGE_STATES, type MessageState } from '../model/types.js';
import { counted } from './pages/format.js';
import type { PageFrame } from './pages/layout.js';

const TEXTS: Readonly<Record<string, string>> = {
  paused: 'Paused: workers claim nothing from this queue until it is resumed.',
  resumed: 'Resumed: workers claim from this queue again.',
  'retried-failed': 'Queued the failed messages again.',
  cleared: 'Cleared: every message of the queue is removed.',
  'events-on': 'Queue events are on: the charts fill as messages are handled.',
  retried: 'Queued again at attempt 1.',
  promoted: 'Its backoff is over: it is queued now.',
  removed: 'Removed the message.',
  canceled: 'Canceled: the message failed, and a running handler was told to stop.',
};

/** The query string that carries a notice: `done=CODE`, with a count or a state where the text needs one. */
export function noticeQuery(code: string, extra: Readonly<Record<string, string>> = {}): string {
  return `?${new URLSearchParams({ done: code, ...extra }).toString()}`;
}

export function noticeFrom(params: URLSearchParams): PageFrame['notice'] {
  const code = params.get('done');
  if (code === null) return null;
  if (code === 'refused') {
    const state = params.get('state');
    const known = MESSAGE_STATES.includes(state as MessageState);
    return {
      kind: 'warn',
      text: `Refused: the message is ${known ? (state ?? '') : 'gone'}, which does not allow it.`,
    };
  }
  const text = TEXTS[code];
  if (text === undefined) return null;
  if (code !== 'retried-failed') return { kind: 'ok', text };
  const n = params.get('n');
  if (n === null || !/^\d{1,12}$/.test(n)) return { kind: 'ok', text };
  return { kind: 'ok', text: `Queued ${counted(Number(n), 'failed message')} again.` };
}
