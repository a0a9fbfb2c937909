/** Reading a whole listing page by page, for the tests of list(). */
import assert from 'node:assert/strict';
import type { Client, ListedMessage, ListOptions } from '../../src/index.js';

/** Every page of a listing, checking that each page respects the limit. */
export async function listAll(client: Client, queue: string, options: ListOptions): Promise<ListedMessage[]> {
  const all: ListedMessage[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.list(queue, { ...options, ...(cursor === undefined ? {} : { cursor }) });
    assert.ok(result.messages.length <= (options.limit ?? 100), 'a page holds at most `limit` messages');
    all.push(...result.messages);
    if (result.cursor === null) return all;
    cursor = result.cursor;
  }
  throw new Error('more than 100 pages');
}
