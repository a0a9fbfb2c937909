/** The front page: every queue with its counts, state, charts and consumers. */
import type { QueueStatus } from '../../model/types.js';
import { html, type Html } from '../html.js';
import { messagePath, queuePath } from '../paths.js';
import type { PageContext } from './context.js';
import { counted, liveCounted } from './format.js';
import { layout } from './layout.js';
import { chartArea, pausedBadge, stateCounts } from './parts.js';

export interface QueueSummary {
  readonly status: QueueStatus;
  readonly eventsOn: boolean;
}

export function queuesPage(
  ctx: PageContext,
  queues: readonly QueueSummary[],
  more: number,
  listError: string | null,
): Html {
  const cards = queues.map(({ status, eventsOn }) => queueCard(ctx, status, eventsOn));
  const body = html`<div class="page-head">
      <h1>Queues</h1>
      <span class="muted">${counted(queues.length, 'queue')}</span>
    </div>
    ${listError === null ? '' : html`<p class="notice warn">The store could not list its queues: ${listError}</p>`}
    ${
      queues.length === 0 && listError === null
        ? html`<div class="panel empty">
            <p>No queues yet. Enqueue a message and it shows here:</p>
            <pre class="code">kvmq enqueue jobs '{"hello":"world"}'</pre>
          </div>`
        : ''
    }
    <div class="cards">${cards}</div>
    ${more > 0 ? html`<p class="muted">${counted(more, 'more queue')} ${more === 1 ? 'is' : 'are'} not shown.</p>` : ''}`;
  return layout(ctx, {
    title: 'Queues',
    crumbs: [{ label: 'Queues' }],
    body,
    live: `${ctx.base}/live`,
  });
}

function queueCard(ctx: PageContext, status: QueueStatus, eventsOn: boolean): Html {
  const consumers = status.consumers.length;
  const holding = status.consumers.reduce((sum, c) => sum + c.holding.length, 0);
  return html`<section class="card">
    <div class="card-head">
      <h2><a href="${queuePath(ctx.base, status.queue)}">${status.queue}</a></h2>
      ${pausedBadge(status)}
      <span class="muted right"
        >${liveCounted('data-total', status.queue, status.total, 'message')} ·
        ${liveCounted('data-consumers', status.queue, consumers, 'consumer')}, ${holding} running</span
      >
    </div>
    ${stateCounts(ctx, status)} ${chartArea(ctx, status.queue, eventsOn)} ${consumerLines(ctx, status)}
  </section>`;
}

/** Consumers shown on a card; the queue page lists them all. */
const CARD_CONSUMERS = 4;
const CARD_HELD = 6;

/** Who works on the queue and what each holds, one line per consumer. */
function consumerLines(ctx: PageContext, status: QueueStatus): Html {
  if (status.consumers.length === 0) return html``;
  const lines = status.consumers.slice(0, CARD_CONSUMERS).map((c) => {
    const held = c.holding.slice(0, CARD_HELD);
    const rest = c.holding.length - held.length;
    return html`<li>
      <span class="mono">${c.host}:${c.pid}</span>
      ${
        held.length === 0
          ? html`<span class="muted">idle</span>`
          : held.map((id) => html`<a class="mono chip" href="${messagePath(ctx.base, status.queue, id)}">${id}</a>`)
      }
      ${rest > 0 ? html`<span class="muted">+${rest} more</span>` : ''}
    </li>`;
  });
  const more = status.consumers.length - CARD_CONSUMERS;
  return html`<ul class="consumers">
    ${lines}${more > 0 ? html`<li class="muted">+${counted(more, 'more consumer')}</li>` : ''}
  </ul>`;
}
