/** One message: everything kvmq keeps about it, and the actions its state allows. */
import { DEFAULT_PRIORITY } from '../../model/scheduling.js';
import type { AttemptRecord, MessageDetails } from '../../model/types.js';
import { html, type Html } from '../html.js';
import { messagePath, queuePath } from '../paths.js';
import type { PageContext } from './context.js';
import { grid, numeric } from './grid.js';
import { stateBadge, utc, when } from './format.js';
import { actionForm, layout, type PageFrame } from './layout.js';
import { payloadView } from './payload.js';
import { flowPanel } from './flow-tree.js';
import type { FlowNode } from '../../model/flow.js';

/** The deadline of the message's time to live (policy.expireAt), or a dash: a message without one waits as long as it takes. */
function expiry(m: MessageDetails, now: number): Html | string {
  const at = m.policy.expireAt;
  return at === undefined ? '–' : html`${utc(at)} UTC (${when(at, now)})`;
}

export function messagePage(
  ctx: PageContext,
  m: MessageDetails,
  notice: PageFrame['notice'],
  now: number,
  flow: FlowNode | null = null,
): Html {
  const path = messagePath(ctx.base, m.queue, m.id);
  const canPromote = m.state === 'queued-with-backoff' || m.state === 'done-with-requeue';
  const locked = m.state === 'locked' || m.state === 'locked-with-requeue';
  const canCancel =
    locked || m.state === 'queued' || m.state === 'queued-with-backoff' || m.state === 'waiting-children';
  const actions = html`<div class="actions">
    ${m.state === 'failed' ? actionForm(ctx, `${path}/retry`, 'Retry') : ''}
    ${canPromote ? actionForm(ctx, `${path}/promote`, 'Run now') : ''}
    ${canCancel ? actionForm(ctx, `${path}/cancel`, 'Cancel', { danger: true }) : ''}
    ${locked ? '' : actionForm(ctx, `${path}/remove`, 'Remove', { danger: true })}
  </div>`;
  const rows: [string, Html | string][] = [
    ['State', stateBadge(m.state)],
    ['Attempt', String(m.attempt)],
    ['Outcome', m.outcome ?? '–'],
    ['Enqueued', html`${utc(m.enqueuedAt)} UTC (${when(m.enqueuedAt, now)})`],
    ['Updated', html`${utc(m.updatedAt)} UTC (${when(m.updatedAt, now)})`],
    ['Consumer', m.consumer ?? '–'],
    ['Until', m.until === null ? '–' : html`${utc(m.until)} UTC (${when(m.until, now)})`],
    ['Priority', m.priority === DEFAULT_PRIORITY ? `${m.priority} (default, runs first)` : String(m.priority)],
    ['Group', m.group ?? '–'],
    ['Expires', expiry(m, now)],
    ['Policy', Object.keys(m.policy).length === 0 ? '–' : JSON.stringify(m.policy)],
    ['Progress', m.progress === null ? '–' : html`<span class="mono">${JSON.stringify(m.progress)}</span>`],
  ];
  const payload = payloadView(m.payload);
  // Shown as a payload is; a message without one (no success yet, or it returned none) has no panel.
  const result = 'result' in m ? payloadView(m.result) : null;
  const body = html`<div class="page-head">
      <h1 class="mono">${m.id}</h1>
      ${stateBadge(m.state)}${actions}
    </div>
    ${
      m.lastError === null
        ? ''
        : html`<section class="panel error">
            <h2>Last error</h2>
            <pre class="code">${m.lastError}</pre>
          </section>`
    }
    <div class="two">
      <section class="panel">
        <h2>Status</h2>
        <table class="fields">
          ${rows.map(
            ([k, v]) =>
              html`<tr>
                <th>${k}</th>
                <td>${v}</td>
              </tr>`,
          )}
        </table>
      </section>
      <section class="panel">
        <h2>Filters</h2>
        ${keyValues(m.filters)}
        <h2>Metadata</h2>
        <pre class="code">${JSON.stringify(m.metadata, null, 2)}</pre>
      </section>
    </div>
    ${flowPanel(ctx, flow, m)}
    <section class="panel">
      <h2>Payload <span class="muted">(${payload.kind})</span></h2>
      <pre class="code payload">${payload.text}</pre>
    </section>
    ${
      result === null
        ? ''
        : html`<section class="panel">
            <h2>Result <span class="muted">(${result.kind})</span></h2>
            <pre class="code result">${result.text}</pre>
          </section>`
    }
    <section class="panel">
      <h2>History</h2>
      ${historyTable(m.history, now)}
    </section>
    <section class="panel">
      <h2>Log</h2>
      ${logView(m.log, m.logDropped)}
    </section>`;
  return layout(ctx, {
    title: `${m.id} in ${m.queue}`,
    crumbs: [
      { label: 'Queues', href: `${ctx.base}/` },
      { label: m.queue, href: queuePath(ctx.base, m.queue) },
      { label: m.id },
    ],
    body,
    notice,
  });
}

function keyValues(values: Readonly<Record<string, string>>): Html {
  const entries = Object.entries(values);
  if (entries.length === 0) return html`<p class="muted">None.</p>`;
  return html`<table class="fields">
    ${entries.map(
      ([k, v]) =>
        html`<tr>
          <th class="mono">${k}</th>
          <td class="mono">${v}</td>
        </tr>`,
    )}
  </table>`;
}

/** The handlers' log (`job.log`), oldest line first, after a note of the older lines dropped. */
function logView(log: readonly string[], dropped: number): Html {
  if (log.length === 0 && dropped === 0) return html`<p class="muted empty">Nothing logged.</p>`;
  return html`${dropped === 0 ? '' : html`<p class="muted">${dropped} older line(s) dropped.</p>`}
    <pre class="code log">${log.join('\n')}</pre>`;
}

function historyTable(history: readonly AttemptRecord[], now: number): Html {
  if (history.length === 0) return html`<p class="muted empty">No failed, retried or lost attempts.</p>`;
  const rows = history.map(
    (a) =>
      html`<tr>
        <td class="num">${a.attempt}</td>
        <td><span class="badge outcome-${a.outcome}">${a.outcome}</span></td>
        <td>${when(a.startedAt, now)}</td>
        <td>${when(a.endedAt, now)}</td>
        <td class="mono">${a.consumer ?? '–'}</td>
        <td><pre class="code small">${a.error ?? '–'}</pre></td>
      </tr>`,
  );
  return grid([numeric('Attempt'), 'Outcome', 'Started', 'Ended', 'Consumer', 'Error'], rows);
}
