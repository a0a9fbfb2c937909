/** The message a schedule's slot enqueues, with an id made from the slot so a retried firing cannot duplicate it. */
import { filterClass } from '../model/filters.js';
import { plainMessage } from '../stores/contract/new-message.js';
import type { NewMessage } from '../stores/contract/contract.js';
import type { ScheduleBody } from './body.js';

/** `<name>@<slot as ISO 8601>`, e.g. `nightly@2026-01-01T03:00:00.000Z`: a valid message id. */
export function slotMessageId(name: string, slot: number): string {
  return `${name}@${new Date(slot).toISOString()}`;
}

export function slotMessages(name: string, body: ScheduleBody, slots: readonly number[]): NewMessage[] {
  const filters = body.filters;
  const klass = filterClass(filters);
  return slots.map((slot) =>
    plainMessage(slotMessageId(name, slot), body.payload, {
      encoding: body.encoding,
      metadata: body.metadata,
      filters,
      filterClass: klass,
      policy: body.policy,
      priority: body.priority,
      group: body.group,
    }),
  );
}
