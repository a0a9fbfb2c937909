/** What the stores that keep reports add to a listing: each message's progress, read for the page's ids. */
import type { StoredPage } from './contract.js';

/** A page's listings with each message's progress from `progress` (id → JSON text, absent: none). */
export function withProgress(page: StoredPage, progress: ReadonlyMap<string, string>): StoredPage {
  const messages = page.messages.map((m) => ({ ...m, progress: progress.get(m.status.id) ?? null }));
  return { ...page, messages };
}
