/**
 * A queue's schedules through a client: defined (checked, its first slot after now), listed, described. The
 * schedule module is loaded on the first call, so a client that never schedules does not load it.
 */
import type { Payload, QueueConfig } from '../model/types.js';
import type { ScheduleInfo, ScheduleOptions } from '../schedule/define.js';
import type { ScheduleTiming } from '../schedule/timing.js';
import type { Store } from '../stores/contract/contract.js';

export interface ScheduleRequest {
  readonly queue: string;
  readonly name: string;
  readonly timing: ScheduleTiming;
  readonly payload: Payload;
  readonly options: ScheduleOptions;
  /** The queue's configuration, for the messages' filters. */
  readonly config: () => Promise<QueueConfig>;
}

/** Creates or replaces the schedule; bad input is a TypeError and nothing is written. */
export async function putSchedule(
  store: Store,
  request: ScheduleRequest,
): Promise<{ created: boolean; schedule: ScheduleInfo }> {
  const { defineSchedule, describeSchedule } = await import('../schedule/define.js');
  const stored = await defineSchedule({ ...request, maxPayloadBytes: store.capabilities.maxPayloadBytes }, Date.now);
  const created = await store.putSchedule(request.queue, stored);
  return { created, schedule: describeSchedule(stored) };
}

/** The queue's schedules (the name already checked), sorted by name. */
export async function listSchedules(store: Store, queue: string): Promise<ScheduleInfo[]> {
  const { describeSchedule } = await import('../schedule/define.js');
  return (await store.schedules(queue)).map(describeSchedule);
}
