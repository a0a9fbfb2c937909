/** The POST actions: each calls one client method and answers with where the browser goes next. */
import type { Client } from '../client/client.js';
import type { ActionResult } from '../model/types.js';
import { MessageGoneError } from '../model/errors.js';
import { HttpError } from './http.js';
import { noticeQuery } from './notices.js';
import { messagePath, queuePath } from './paths.js';
import type { MessageAction, QueueAction } from './router.js';
import { knownQueue } from './views.js';

/** Runs a queue action; returns the URL to redirect to. */
export async function queueAction(
  client: Client,
  base: string,
  queue: string,
  action: QueueAction,
  form: URLSearchParams,
): Promise<string> {
  await knownQueue(client, queue);
  const path = queuePath(base, queue);
  switch (action) {
    case 'pause':
      await client.pause(queue);
      return path + noticeQuery('paused');
    case 'resume':
      await client.resume(queue);
      return path + noticeQuery('resumed');
    case 'retry-failed': {
      const { retried } = await client.retryFailed(queue);
      return path + noticeQuery('retried-failed', { n: String(retried) });
    }
    case 'clear':
      // The confirmation page sends the queue's name back: a bare POST cannot clear by accident.
      if (form.get('confirm') !== queue) return `${path}/clear`;
      await client.clear(queue);
      return path + noticeQuery('cleared');
    case 'events':
      await client.configure(queue, { events: true });
      return path + noticeQuery('events-on');
  }
}

export async function messageAction(
  client: Client,
  base: string,
  queue: string,
  id: string,
  action: MessageAction,
): Promise<string> {
  const path = messagePath(base, queue, id);
  const gone = (): HttpError => new HttpError(404, `There is no message '${id}' in queue '${queue}'.`);
  const result: ActionResult = await actOn(client, queue, id, action).catch((error: unknown) => {
    throw error instanceof MessageGoneError ? gone() : error;
  });
  if (!result.ok) {
    if (result.state === null) throw gone();
    return path + noticeQuery('refused', { state: result.state });
  }
  if (action === 'remove') return queuePath(base, queue) + noticeQuery('removed');
  // Canceled into the dead-letter queue: nothing is left here to show.
  if (action === 'cancel') return (result.state === null ? queuePath(base, queue) : path) + noticeQuery('canceled');
  return path + noticeQuery(action === 'retry' ? 'retried' : 'promoted');
}

function actOn(client: Client, queue: string, id: string, action: MessageAction): Promise<ActionResult> {
  switch (action) {
    case 'retry':
      return client.retry(queue, id);
    case 'promote':
      return client.promote(queue, id);
    case 'cancel':
      return client.cancel(queue, id);
    case 'remove':
      return client.remove(queue, id);
  }
}
