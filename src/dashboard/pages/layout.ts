/** The frame of every page: head, top bar, breadcrumbs, notice, content. */
import { html, type Html, type HtmlValue } from '../html.js';
import type { PageContext } from './context.js';

export interface Crumb {
  readonly label: string;
  readonly href?: string;
}

export interface PageFrame {
  readonly title: string;
  readonly crumbs: readonly Crumb[];
  readonly body: HtmlValue;
  /** A line above the content, e.g. what an action did. */
  readonly notice?: { readonly kind: 'ok' | 'warn'; readonly text: string } | null;
  /** The live-update stream this page listens to (server-sent events). */
  readonly live?: string;
}

export function layout(ctx: PageContext, frame: PageFrame): Html {
  const crumbs = frame.crumbs.map(
    (crumb, i) =>
      html`${i > 0 ? html`<span class="sep">/</span>` : ''}${
        crumb.href === undefined ? html`<span>${crumb.label}</span>` : html`<a href="${crumb.href}">${crumb.label}</a>`
      }`,
  );
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${frame.title} · kvmq</title>
        <link rel="stylesheet" href="${ctx.style}" />
        <script defer src="${ctx.script}"></script>
      </head>
      <body data-base="${ctx.base}" ${frame.live === undefined ? '' : html` data-live="${frame.live}"`}>
        <header class="topbar">
          <a class="brand" href="${ctx.base}/"><span class="logo">kvmq</span> dashboard</a>
          <nav class="crumbs">${crumbs}</nav>
          <span class="store" title="store">${ctx.store}</span>
          ${ctx.readOnly ? html`<span class="badge readonly">read-only</span>` : ''}
          <span class="live-dot" title="live updates" hidden></span>
        </header>
        <main>
          ${frame.notice == null ? '' : html`<p class="notice ${frame.notice.kind}" role="status">${frame.notice.text}</p>`}
          ${frame.body}
        </main>
      </body>
    </html> `;
}

/** A POST button with the CSRF token; nothing at all in read-only mode. */
export function actionForm(
  ctx: PageContext,
  action: string,
  label: string,
  options: { readonly danger?: boolean; readonly fields?: Readonly<Record<string, string>> } = {},
): Html {
  if (ctx.readOnly) return html``;
  const fields = Object.entries(options.fields ?? {}).map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`,
  );
  return html`<form method="post" action="${action}" class="inline">
    <input type="hidden" name="_csrf" value="${ctx.csrf}" />${fields}<button
      type="submit"
      class="btn${options.danger === true ? ' danger' : ''}"
    >
      ${label}
    </button>
  </form>`;
}
