/**
 * Reading messages back: a page of a queue's messages (list) and everything kept about one (show), their stored
 * content decoded for the caller.
 */
import { checkListOptions } from '../model/list.js';
import { decodePayload } from '../model/payload.js';
import { decodePolicy } from '../model/policy.js';
import { EMPTY_LOG } from '../model/reports.js';
import { MESSAGE_STATES } from '../model/types.js';
import type {
  FilterValues,
  ListedMessage,
  ListOptions,
  ListPage,
  MessageDetails,
  Metadata,
  Payload,
} from '../model/types.js';
import type { Store, StoredContent, StoredReport } from '../stores/contract/contract.js';

// The states of a store without flows.
const WITHOUT_FLOWS = MESSAGE_STATES.filter((state) => state !== 'waiting-children');
/** What `show` says of a message on a store that keeps no reports. */
const NO_REPORT: StoredReport = { progress: null, log: EMPTY_LOG };

/** A page of the queue's messages in the given states (the queue name already checked). */
export async function listMessages(store: Store, queue: string, options: ListOptions): Promise<ListPage> {
  // A store without flows has no `waiting-children`: it is never asked for that state.
  const available = store.capabilities.flows ? undefined : WITHOUT_FLOWS;
  const query = checkListOptions(options, available);
  if (query.states.length === 0) return { messages: [], cursor: null };
  const page = await store.list(queue, query);
  const messages = page.messages.map(({ status, content, progress }): ListedMessage => {
    const listed = content === null ? status : { ...status, ...decodeContent(content) };
    return progress == null ? listed : { ...listed, progress: JSON.parse(progress) as unknown };
  });
  return { messages, cursor: page.cursor };
}

/** Everything kept about a message (queue and id already checked); null once gone. */
export async function showMessage<P, R>(store: Store, queue: string, id: string): Promise<MessageDetails<P, R> | null> {
  const details = await store.inspect(queue, id);
  if (details === null) return null;
  const report = details.report ?? NO_REPORT;
  // The types are the caller's promise (see Client.queue()); the values are what was stored.
  return <MessageDetails<P, R>>{
    ...details.status,
    ...decodeContent(details.content),
    policy: decodePolicy(details.policy) ?? {},
    priority: details.priority,
    group: details.group,
    history: details.history,
    progress: report.progress === null ? null : (JSON.parse(report.progress) as unknown),
    log: report.log.lines,
    logDropped: report.log.dropped,
  };
}

function decodeContent(content: StoredContent): { payload: Payload; metadata: Metadata; filters: FilterValues } {
  return {
    payload: decodePayload(content.payload, content.encoding),
    metadata: content.metadata,
    filters: content.filters,
  };
}
