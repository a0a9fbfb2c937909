/** Records what handlers saw, and waits on message states. */
import type { Client, Job, MessageState, MessageStatus } from '../../src/index.js';
import { untilAborted, waitFor, type WaitOptions } from './wait.js';

export interface Seen {
  readonly id: string;
  readonly attempt: number;
  readonly payload: unknown;
  /** Date.now() when the handler was called. */
  readonly at: number;
  readonly job: Job;
}

/** Every handler call, in call order. */
export class JobLog {
  readonly seen: Seen[] = [];

  record(job: Job): void {
    this.seen.push({ id: job.id, attempt: job.attempt, payload: job.payload, at: Date.now(), job });
  }

  /** Records the call, then holds the message until its job.signal aborts (a stop, a lost lock). */
  async recordUntilAborted(job: Job): Promise<void> {
    this.record(job);
    await untilAborted(job.signal);
  }

  ids(): string[] {
    return this.seen.map((s) => s.id);
  }

  of(id: string): Seen[] {
    return this.seen.filter((s) => s.id === id);
  }

  /** Waits until `id` was handed to a handler with `attempt` (any attempt if omitted). */
  async handled(id: string, attempt?: number, options: WaitOptions = {}): Promise<Seen> {
    return waitFor(() => this.seen.find((s) => s.id === id && (attempt === undefined || s.attempt === attempt)), {
      // A function, so a timeout reports what had been seen by then.
      what: () =>
        `${id} to be handled${attempt === undefined ? '' : ` with attempt ${attempt}`} (seen: ${this.describe()})`,
      ...options,
    });
  }

  /** Waits until at least `count` calls were made. */
  async count(count: number, options: WaitOptions = {}): Promise<void> {
    await waitFor(() => this.seen.length >= count, {
      what: () => `${count} handler calls (seen: ${this.describe()})`,
      ...options,
    });
  }

  private describe(): string {
    return JSON.stringify(this.seen.map((s) => `${s.id}#${s.attempt}`));
  }
}

/** Waits until the message is in `state` (null: gone) and returns its status. */
export async function waitForState(
  client: Client,
  queue: string,
  id: string,
  state: MessageState | null,
  options: WaitOptions = {},
): Promise<MessageStatus | null> {
  let last: MessageStatus | null = null;
  await waitFor(
    async () => {
      last = await client.status(queue, id);
      return (last?.state ?? null) === state;
    },
    { what: () => `${id} to be ${state ?? 'gone'} (last: ${JSON.stringify(last)})`, ...options },
  );
  return last;
}

/** Like waitForState, for a state that must exist; returns the status. */
export async function waitForStatus(
  client: Client,
  queue: string,
  id: string,
  state: MessageState,
  options: WaitOptions = {},
): Promise<MessageStatus> {
  const status = await waitForState(client, queue, id, state, options);
  if (status === null) throw new Error(`${id} vanished`);
  return status;
}

/** The message's state now, or null. */
export async function stateOf(client: Client, queue: string, id: string): Promise<MessageState | null> {
  return (await client.status(queue, id))?.state ?? null;
}
