/**
 * A queue's schedules, in its `schedules` hash: name → `<next slot ms> <body>`. Put, list and remove are
 * single commands; firing is the fire-schedule script, a compare-and-set of that value that enqueues the
 * due slots' messages with the enqueue script's own code, in one step.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { encodeContent, list, text } from './codec.js';
import { encodeMetadata, pushMessageArgs, result } from './enqueue.js';
import { queueKey } from './keys.js';
import { SCRIPTS } from './scripts.generated.js';
import type { ScriptArg, Scripts } from './scripts.js';
import type { NewMessage, StoredSchedule } from '../contract/contract.js';
import type { EnqueueResult } from '../../model/types.js';

function stored(schedule: StoredSchedule): string {
  return `${schedule.nextAt} ${schedule.body}`;
}

export async function putSchedule(
  scripts: Scripts,
  prefix: string,
  queue: string,
  schedule: StoredSchedule,
): Promise<boolean> {
  const key = queueKey(prefix, queue, 'schedules');
  return (await scripts.call((redis) => redis.hset(key, schedule.name, stored(schedule)))) === 1;
}

export async function listSchedules(scripts: Scripts, prefix: string, queue: string): Promise<StoredSchedule[]> {
  const key = queueKey(prefix, queue, 'schedules');
  const all = await scripts.call((redis) => redis.hgetall(key));
  return Object.entries(all)
    .map(([name, value]) => {
      const space = value.indexOf(' ');
      const nextAt = Number(value.slice(0, space));
      if (space < 0 || !Number.isSafeInteger(nextAt)) {
        throw new StoreLayoutError(`${key} field ${name} is not kvmq's '<next slot> <body>'; fix or delete it`);
      }
      return { name, body: value.slice(space + 1), nextAt };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export async function removeSchedule(scripts: Scripts, prefix: string, queue: string, name: string): Promise<boolean> {
  const key = queueKey(prefix, queue, 'schedules');
  return (await scripts.call((redis) => redis.hdel(key, name))) === 1;
}

export async function fireSchedule(
  scripts: Scripts,
  queue: string,
  expected: StoredSchedule,
  nextAt: number,
  messages: readonly NewMessage[],
): Promise<EnqueueResult[] | null> {
  // The messages' shapes come before their arguments (lib/enqueue.lua).
  const args: ScriptArg[] = [expected.name, stored(expected), nextAt, ''];
  let shapes = '';
  for (const m of messages) {
    shapes += pushMessageArgs(args, m, encodeContent(m.payload, m.encoding), encodeMetadata(m.metadata));
  }
  args[3] = shapes;
  const reply = await scripts.run(SCRIPTS.fireSchedule, queue, args);
  if (reply === null) return null;
  const replies = list(reply);
  return messages.map((m, i) => result(m.id, text(replies[i]) ?? ''));
}
