/** One queue: its state, actions, charts, consumers, and a page of its messages in one state. */
import type { ListedMessage, MessageState, QueueConfig, QueueStatus } from '../../model/types.js';
import { html, type Html } from '../html.js';
import { messagePath, queuePath } from '../paths.js';
import type { PageContext } from './context.js';
import { grid, numeric } from './grid.js';
import { STATE_LABELS, count, liveCounted, progressText, stateBadge, when } from './format.js';
import { actionForm, layout, type PageFrame } from './layout.js';
import { chartArea, consumersTable, pausedBadge, stateCounts } from './parts.js';
import { configPanel, period } from './config.js';

export interface QueueView {
  readonly status: QueueStatus;
  readonly eventsOn: boolean;
  /** The queue's configuration: its limits shown by its name when set, all of it in a panel of its own. */
  readonly config: QueueConfig;
  /** The listed state; null lists every state. */
  readonly state: MessageState | null;
  readonly messages: readonly ListedMessage[];
  /** The next page's URL, or null on the last page. */
  readonly next: string | null;
  /** This is not the first page. */
  readonly paged: boolean;
  /** The id searched for and not found. */
  readonly missing: string | null;
  readonly notice: PageFrame['notice'];
}

export function queuePage(ctx: PageContext, view: QueueView, now: number): Html {
  const { status } = view;
  const path = queuePath(ctx.base, status.queue);
  const actions = html`<div class="actions">
    ${actionForm(ctx, `${path}/${status.paused ? 'resume' : 'pause'}`, status.paused ? 'Resume' : 'Pause')}
    ${status.counts.failed > 0 ? actionForm(ctx, `${path}/retry-failed`, `Retry all failed (${count(status.counts.failed)})`) : ''}
    ${ctx.readOnly ? '' : html`<a class="btn danger" href="${path}/clear">Clear…</a>`}
  </div>`;
  const body = html`<div class="page-head">
      <h1>${status.queue}</h1>
      ${pausedBadge(status)}
      <span class="muted">${liveCounted('data-total', status.queue, status.total, 'message')}</span
      >${limitsText(view.config)}${actions}
    </div>
    ${stateCounts(ctx, status, view.state)}
    <div class="two">
      <section class="panel">
        <h2>Last hour</h2>
        ${chartArea(ctx, status.queue, view.eventsOn)}
      </section>
      <section class="panel">
        <h2>Consumers <span class="muted" data-consumers="${status.queue}">${status.consumers.length}</span></h2>
        ${consumersTable(ctx, status.queue, status.consumers, now)}
      </section>
    </div>
    <section class="panel">
      <div class="panel-head">
        <h2>${view.state === null ? 'All messages' : `${STATE_LABELS[view.state]} messages`}</h2>
        <form method="get" action="${path}" class="search">
          <input
            type="search"
            name="id"
            placeholder="Find a message by id"
            aria-label="Message id"
            maxlength="256"
            required
          /><button type="submit" class="btn">Find</button>
        </form>
      </div>
      ${stateTabs(path, view.state)}
      ${view.missing === null ? '' : html`<p class="notice warn">No message with id <span class="mono">${view.missing}</span> in this queue.</p>`}
      ${messagesTable(ctx, status.queue, view.messages, now)}
      <div class="pager">
        ${view.paged ? html`<a class="btn" href="${path}${view.state === null ? '' : `?state=${view.state}`}">« First page</a>` : ''}
        ${view.next === null ? '' : html`<a class="btn" rel="next" href="${view.next}">Next page »</a>`}
      </div>
    </section>
    ${configPanel(ctx, view.config)}`;
  return layout(ctx, {
    title: status.queue,
    crumbs: [{ label: 'Queues', href: `${ctx.base}/` }, { label: status.queue }],
    body,
    notice: view.notice,
    live: `${path}/live`,
  });
}

/**
 * 'at most 100 per 1 s', 'at most 3 per group', 'at most 2 per 1 s per group': what the queue's configuration
 * holds its workers to.
 */
function limitsText({ rateLimit, groupConcurrency, groupRateLimit }: QueueConfig): Html {
  const rate =
    rateLimit === null
      ? ''
      : html`<span class="muted" data-rate-limit title="rate limit, across all workers"
          >at most ${count(rateLimit.max)} per ${period(rateLimit.perMs)}</span
        >`;
  const group =
    groupConcurrency === null
      ? ''
      : html`<span class="muted" data-group-concurrency title="group concurrency: held at once per group"
          >at most ${count(groupConcurrency)} per group</span
        >`;
  const groupRate =
    groupRateLimit === null
      ? ''
      : html`<span class="muted" data-group-rate-limit title="group rate limit: starts per group, across all workers"
          >at most ${count(groupRateLimit.max)} per ${period(groupRateLimit.perMs)} per group</span
        >`;
  return html`${rate}${group}${groupRate}`;
}

function stateTabs(path: string, selected: MessageState | null): Html {
  const tab = (label: string, href: string, on: boolean): Html =>
    html`<a class="tab${on ? ' selected' : ''}" href="${href}">${label}</a>`;
  return html`<nav class="tabs">
    ${tab('All', path, selected === null)}${(Object.keys(STATE_LABELS) as MessageState[]).map((s) => tab(STATE_LABELS[s], `${path}?state=${s}`, selected === s))}
  </nav>`;
}

function messagesTable(ctx: PageContext, queue: string, messages: readonly ListedMessage[], now: number): Html {
  if (messages.length === 0) return html`<p class="muted empty">No messages here.</p>`;
  const rows = messages.map(
    (m) =>
      html`<tr>
        <td><a class="mono" href="${messagePath(ctx.base, queue, m.id)}">${m.id}</a></td>
        <td>${stateBadge(m.state)}</td>
        <td class="num">${m.attempt}</td>
        <td>${m.outcome ?? html`<span class="muted">–</span>`}</td>
        <td class="mono">
          ${m.progress === undefined ? html`<span class="muted">–</span>` : progressText(m.progress)}
        </td>
        <td class="error-cell">
          ${m.lastError === null ? html`<span class="muted">–</span>` : firstLine(m.lastError)}
        </td>
        <td>${when(m.enqueuedAt, now)}</td>
        <td>${when(m.updatedAt, now)}</td>
      </tr>`,
  );
  return grid(
    ['Id', 'State', numeric('Attempt'), 'Outcome', 'Progress', 'Last error', 'Enqueued', 'Updated'],
    rows,
    'grid messages',
  );
}

function firstLine(text: string): string {
  const line = text.split('\n', 1)[0] ?? '';
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}
