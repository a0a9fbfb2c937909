/** How values read on a page: times, counts, state names. */
import { STATE_LABELS } from '../../model/state-labels.js';
import type { MessageState } from '../../model/types.js';
import { html, raw, type Html } from '../html.js';

/** '2026-11-25 12:34:56' in UTC: one zone for every reader of a shared screen. */
export function utc(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
}

/** '12s ago', '5 min ago', 'in 3 h'. */
export function relative(ms: number, now: number): string {
  const delta = Math.round((ms - now) / 1000);
  const size = Math.abs(delta);
  const text =
    size < 60
      ? `${size}s`
      : size < 3600
        ? `${Math.round(size / 60)} min`
        : size < 172_800
          ? `${Math.round(size / 3600)} h`
          : `${Math.round(size / 86_400)} d`;
  return delta <= 0 ? `${text} ago` : `in ${text}`;
}

/** A time with its exact value on hover and in markup. */
export function when(ms: number | null, now: number): Html {
  if (ms === null) return html`<span class="muted">–</span>`;
  return html`<time datetime="${new Date(ms).toISOString()}" title="${utc(ms)} UTC">${relative(ms, now)}</time>`;
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** A count with its noun agreeing: '1 message', '2 messages', '1,240 messages'. */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${count(n)} ${n === 1 ? one : many}`;
}

/**
 * A counted noun that live updates rewrite: the browser script finds it by `attribute` (`data-total`,
 * `data-consumers`) and the queue, and reads the noun from `data-one` and `data-many`.
 */
export function liveCounted(attribute: string, queue: string, n: number, one: string, many = `${one}s`): Html {
  return html`<span ${raw(attribute)}="${queue}" data-one="${one}" data-many="${many}">${counted(n, one, many)}</span>`;
}

export { STATE_LABELS };

export function stateBadge(state: MessageState): Html {
  return html`<span class="badge state-${state}" title="${state}">${STATE_LABELS[state]}</span>`;
}

/** A store URL without its password or user, safe to show. */
export function storeLabel(url: string): string {
  // By the last '@', so a password holding '/' or '@' is dropped whole too.
  const start = url.indexOf('://');
  const at = url.lastIndexOf('@');
  return start < 0 || at < start ? url : url.slice(0, start + 3) + url.slice(at + 1);
}

/** A handler's progress in a cell: its JSON, cut to a line. */
export function progressText(progress: unknown): string {
  const text = JSON.stringify(progress);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}
