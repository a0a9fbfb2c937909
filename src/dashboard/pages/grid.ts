/** A table of rows with a header line: the one shape every list on the dashboard takes. */
import { html, type Html } from '../html.js';

export type Column = string | { readonly label: string; readonly numeric: true };

/** A right-aligned column of numbers. */
export function numeric(label: string): Column {
  return { label, numeric: true };
}

export function grid(columns: readonly Column[], rows: readonly Html[], className = 'grid'): Html {
  const heads = columns.map((column) =>
    typeof column === 'string' ? html`<th>${column}</th>` : html`<th class="num">${column.label}</th>`,
  );
  return html`<table class="${className}">
    <thead>
      <tr>
        ${heads}
      </tr>
    </thead>
    <tbody>
      ${rows}
    </tbody>
  </table>`;
}
