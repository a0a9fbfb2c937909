/** list(): pages of messages by state, read from the queue's indexes by the `list` script. */
import { makeCursor, readCursor, type ListQuery } from '../../model/list.js';
import { list, storedContent, text } from './codec.js';
import { STATUS_FIELDS, statusFields, withResult } from './inspect.js';
import { SCRIPTS } from './scripts.generated.js';
import type { Scripts } from './scripts.js';
import type { StoredListing, StoredPage } from '../contract/contract.js';

// Index entries one script call looks at, at most: a listing that skips many
// (an outcome filter) goes on in further calls rather than blocking Redis.
const LOOK_PER_CALL = 5000;
const POSITION_PARTS = 4;

export async function listMessages(
  scripts: Scripts,
  queue: string,
  query: ListQuery,
  where: string,
): Promise<StoredPage> {
  let position = readCursor(query, POSITION_PARTS) ?? ['', '', '', ''];
  const messages: StoredListing[] = [];
  const per = 1 + STATUS_FIELDS + (query.payload ? 4 : 0);
  for (;;) {
    const reply = list(
      await scripts.run(SCRIPTS.list, queue, [
        query.states.join(','),
        query.outcome ?? '',
        query.limit - messages.length,
        LOOK_PER_CALL,
        query.payload ? '1' : '0',
        ...position,
      ]),
    );
    for (let i = 1 + POSITION_PARTS; i + per <= reply.length; i += per) {
      const id = text(reply[i]) ?? '';
      const fields = reply.slice(i + 1, i + per);
      messages.push({
        status: query.payload
          ? withResult(statusFields(queue, id, fields), fields[10], where)
          : statusFields(queue, id, fields),
        content: query.payload ? storedContent(fields[7], fields[8], fields[9], where) : null,
      });
    }
    if (text(reply[0]) === 'end') return { messages, cursor: null };
    position = reply.slice(1, 1 + POSITION_PARTS).map((part) => text(part) ?? '');
    if (messages.length >= query.limit) return { messages, cursor: makeCursor(query, position) };
  }
}
