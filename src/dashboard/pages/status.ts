/** Pages that answer instead of the one asked for: errors, the token request, the clear confirmation. */
import { html, type Html } from '../html.js';
import { queuePath } from '../paths.js';
import type { PageContext } from './context.js';
import { counted } from './format.js';
import { actionForm, layout } from './layout.js';

export const STATUS_TITLES: Readonly<Record<number, string>> = {
  400: 'Bad request',
  401: 'Token needed',
  403: 'Refused',
  404: 'Not found',
  405: 'Method not allowed',
  413: 'Request too large',
  500: 'Something went wrong',
  503: 'Unavailable',
};

export function errorPage(ctx: PageContext, status: number, detail: string): Html {
  const title = STATUS_TITLES[status] ?? 'Error';
  return layout(ctx, {
    title,
    crumbs: [{ label: 'Queues', href: `${ctx.base}/` }, { label: title }],
    body: html`<section class="panel problem">
      <h1><span class="muted">${status}</span> ${title}</h1>
      <p>${detail}</p>
      <p><a class="btn" href="${ctx.base}/">All queues</a></p>
    </section>`,
  });
}

export function clearPage(ctx: PageContext, queue: string, total: number): Html {
  const path = queuePath(ctx.base, queue);
  return layout(ctx, {
    title: `Clear ${queue}`,
    crumbs: [{ label: 'Queues', href: `${ctx.base}/` }, { label: queue, href: path }, { label: 'Clear' }],
    body: html`<section class="panel problem">
      <h1>Clear queue <span class="mono">${queue}</span>?</h1>
      <p>
        This removes every message of the queue (${counted(total, 'message')}), in every state. Its configuration stays.
        It cannot be undone.
      </p>
      <div class="actions">
        ${actionForm(ctx, `${path}/clear`, `Remove ${counted(total, 'message')}`, { danger: true, fields: { confirm: queue } })}
        <a class="btn" href="${path}">Cancel</a>
      </div>
    </section>`,
  });
}
