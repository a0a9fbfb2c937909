/** The GET pages: read what a page shows through the client, then render it. */
import type { Client } from '../client/client.js';
import { MAX_LIST_LIMIT } from '../model/list.js';
import { MESSAGE_STATES, type MessageState, type QueueStatus } from '../model/types.js';
import type { Html } from './html.js';
import { HttpError } from './http.js';
import { noticeFrom } from './notices.js';
import type { PageContext } from './pages/context.js';
import { messagePage } from './pages/message.js';
import { queuePage } from './pages/queue.js';
import { queuesPage, type QueueSummary } from './pages/queues.js';
import { clearPage } from './pages/status.js';
import { messagePath, queuePath } from './paths.js';

/** Queues the front page shows at most; the rest are counted. */
export const MAX_QUEUES_SHOWN = 200;
const PAGE_SIZE = 50;

/** The queue's status, or a 404 when the store holds nothing of it (no configuration, no messages). */
export async function knownQueue(client: Client, queue: string): Promise<QueueStatus> {
  const status = await client.queueStatus(queue);
  if (status.total > 0 || status.consumers.length > 0) return status;
  if ((await client.queues().catch((): string[] => [])).includes(queue)) return status;
  throw new HttpError(404, `There is no queue named '${queue}' in this store.`);
}

export async function queuesView(client: Client, ctx: PageContext): Promise<Html> {
  let names: string[] = [];
  let listError: string | null = null;
  try {
    names = await client.queues();
  } catch (error) {
    listError = error instanceof Error ? error.message : String(error);
  }
  const shown = names.slice(0, MAX_QUEUES_SHOWN);
  const summaries = await Promise.all(
    shown.map(async (queue): Promise<QueueSummary> => {
      const [status, config] = await Promise.all([client.queueStatus(queue), client.config(queue)]);
      return { status, eventsOn: config.events };
    }),
  );
  return queuesPage(ctx, summaries, names.length - shown.length, listError);
}

/** Paging parameters: `state`, `cursor`, `limit`; anything malformed is a 400 that says what is allowed. */
function pagingOf(params: URLSearchParams): { state: MessageState | null; cursor: string | null; limit: number } {
  const state = params.get('state');
  if (state !== null && !MESSAGE_STATES.includes(state as MessageState)) {
    throw new HttpError(400, `state must be one of ${MESSAGE_STATES.join(', ')}; got '${state}'.`);
  }
  const limitText = params.get('limit');
  const limit = limitText === null ? PAGE_SIZE : Number(limitText);
  if (limitText !== null && (!/^\d{1,4}$/.test(limitText) || limit < 1 || limit > MAX_LIST_LIMIT)) {
    throw new HttpError(400, `limit must be a whole number from 1 to ${MAX_LIST_LIMIT}; got '${limitText}'.`);
  }
  const cursor = params.get('cursor');
  if (cursor !== null && !/^[A-Za-z0-9_-]{1,4096}$/.test(cursor)) {
    throw new HttpError(400, 'cursor must be the one a previous page of this listing linked to.');
  }
  return { state: state as MessageState | null, cursor, limit };
}

export type QueueViewResult = { readonly redirect: string } | { readonly page: Html; readonly status: number };

export async function queueView(
  client: Client,
  ctx: PageContext,
  queue: string,
  params: URLSearchParams,
  now: number,
): Promise<QueueViewResult> {
  const paging = pagingOf(params);
  const status = await knownQueue(client, queue);
  const searched = params.get('id');
  let missing: string | null = null;
  if (searched !== null && searched !== '') {
    const found = await client.status(queue, searched).catch((error: unknown) => {
      if (error instanceof TypeError) return null;
      throw error;
    });
    if (found !== null) return { redirect: messagePath(ctx.base, queue, searched) };
    missing = searched;
  }
  const [config, page] = await Promise.all([
    client.config(queue),
    client
      .list(queue, {
        ...(paging.state === null ? {} : { state: paging.state }),
        limit: paging.limit,
        ...(paging.cursor === null ? {} : { cursor: paging.cursor }),
      })
      .catch((error: unknown) => {
        // A cursor of another listing, or one the store cannot read: the caller's mistake.
        if (error instanceof TypeError) throw new HttpError(400, error.message);
        throw error;
      }),
  ]);
  const next =
    page.cursor === null
      ? null
      : `${queuePath(ctx.base, queue)}?${new URLSearchParams({
          ...(paging.state === null ? {} : { state: paging.state }),
          ...(paging.limit === PAGE_SIZE ? {} : { limit: String(paging.limit) }),
          cursor: page.cursor,
        }).toString()}`;
  const html = queuePage(
    ctx,
    {
      status,
      eventsOn: config.events,
      config,
      state: paging.state,
      messages: page.messages,
      next,
      paged: paging.cursor !== null,
      missing,
      notice: noticeFrom(params),
    },
    now,
  );
  return { page: html, status: missing === null ? 200 : 404 };
}

export async function messageView(
  client: Client,
  ctx: PageContext,
  queue: string,
  id: string,
  params: URLSearchParams,
  now: number,
): Promise<Html> {
  const details = await client.show(queue, id);
  if (details === null)
    throw new HttpError(
      404,
      `There is no message '${id}' in queue '${queue}' (it may have been removed or collected).`,
    );
  // A store without flows refuses getFlow: its messages are in none.
  const flow = await client.getFlow(queue, id).catch((error: unknown) => {
    if (error instanceof TypeError) return null;
    throw error;
  });
  return messagePage(ctx, details, noticeFrom(params), now, flow);
}

export async function clearView(client: Client, ctx: PageContext, queue: string): Promise<Html> {
  const status = await knownQueue(client, queue);
  return clearPage(ctx, queue, status.total);
}
