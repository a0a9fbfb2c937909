/** Pieces that more than one page shows: a queue's counts, its charts, its consumers. */
import type { ConsumerInfo, MessageState, QueueStatus } from '../../model/types.js';
import { MESSAGE_STATES } from '../../model/types.js';
import { html, type Html } from '../html.js';
import { messagePath, queuePath } from '../paths.js';
import type { PageContext } from './context.js';
import { grid, numeric } from './grid.js';
import { actionForm } from './layout.js';
import { count, STATE_LABELS, when } from './format.js';

/** The counts per state; each links to that state's messages and is updated live. */
export function stateCounts(ctx: PageContext, status: QueueStatus, selected: MessageState | null = null): Html {
  const path = queuePath(ctx.base, status.queue);
  const cells = MESSAGE_STATES.map(
    (state) =>
      html`<a class="count state-${state}${state === selected ? ' selected' : ''}" href="${path}?state=${state}">
        <span class="n" data-count="${status.queue}" data-state="${state}">${count(status.counts[state])}</span>
        <span class="label">${STATE_LABELS[state]}</span></a
      >`,
  );
  return html`<div class="counts">${cells}</div>`;
}

export function pausedBadge(status: QueueStatus): Html {
  return html`<span class="badge ${status.paused ? 'paused' : 'active'}" data-paused="${status.queue}"
    >${status.paused ? 'paused' : 'active'}</span
  >`;
}

/** Where the client script draws the last hour; without script it says what it would show. */
export function chartArea(ctx: PageContext, queue: string, eventsOn: boolean | null): Html {
  const data = `${queuePath(ctx.base, queue)}/chart.json`;
  if (eventsOn === false) {
    return html`<div class="chart off">
      <p>Throughput and failure-rate charts come from queue events, which are off for this queue.</p>
      ${actionForm(ctx, `${queuePath(ctx.base, queue)}/events`, 'Turn on queue events')}
    </div>`;
  }
  return html`<div class="chart" data-chart="${data}">
    <noscript>Charts of the last hour need JavaScript; the data is at <a href="${data}">chart.json</a>.</noscript>
  </div>`;
}

export function consumersTable(ctx: PageContext, queue: string, consumers: readonly ConsumerInfo[], now: number): Html {
  if (consumers.length === 0) return html`<p class="muted empty">No live consumers.</p>`;
  const rows = consumers.map(
    (c) =>
      html`<tr>
        <td class="mono">${c.id}</td>
        <td>${c.host}</td>
        <td class="num">${c.pid}</td>
        <td>${when(c.startedAt, now)}</td>
        <td>${when(c.lastSeenAt, now)}</td>
        <td>
          ${c.holding.length === 0 ? html`<span class="muted">idle</span>` : c.holding.map((id) => html`<a class="mono chip" href="${messagePath(ctx.base, queue, id)}">${id}</a> `)}
        </td>
      </tr>`,
  );
  return grid(['Consumer', 'Host', numeric('PID'), 'Started', 'Last seen', 'Holding'], rows);
}
