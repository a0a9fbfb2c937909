/** A flow's tree on the message page of any of its nodes: each message linked, with its state, under its parent. */
import type { FlowNode } from '../../model/flow.js';
import { html, type Html } from '../html.js';
import { messagePath } from '../paths.js';
import type { PageContext } from './context.js';
import { stateBadge } from './format.js';

/** The panel, or nothing for a message in no flow (a tree of one). `current` is the page's message. */
export function flowPanel(
  ctx: PageContext,
  tree: FlowNode | null,
  current: { queue: string; id: string },
): Html | string {
  if (tree === null || tree.children.length === 0) return '';
  return html`<section class="panel">
    <h2>Flow</h2>
    <ul class="flow-tree">
      ${nodeItem(ctx, tree, current)}
    </ul>
  </section>`;
}

function nodeItem(ctx: PageContext, node: FlowNode, current: { queue: string; id: string }): Html {
  const here = node.queue === current.queue && node.id === current.id;
  const name = html`<span class="mono">${node.queue}/${node.id}</span>`;
  return html`<li>
    ${here ? html`<strong>${name}</strong>` : html`<a href="${messagePath(ctx.base, node.queue, node.id)}">${name}</a>`}
    ${stateBadge(node.state)}
    ${
      node.children.length === 0
        ? ''
        : html`<ul>
            ${node.children.map((child) => nodeItem(ctx, child, current))}
          </ul>`
    }
  </li>`;
}
