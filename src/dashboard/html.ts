/**
 * HTML built by tagged templates: every interpolated value is escaped unless it is
 * already `Html` (made by this module), so a page cannot carry a store's text as markup.
 */

/** Markup known to be safe: only `html` and `raw` make it. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text as HTML text or attribute value: the five characters that can end either are escaped. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** A value in a template: Html as is, arrays joined, null/undefined/false as nothing, the rest escaped text. */
export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): Html {
  let text = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) text += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(text);
}

/** Markup this module's caller vouches for (generated constants, never a store's text). */
export function raw(text: string): Html {
  return new Html(text);
}
