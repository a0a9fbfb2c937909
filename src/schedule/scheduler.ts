/**
 * The scheduler loop of one queue, run once per client for the workers that fire schedules (shared.ts): read
 * the queue's schedules, fire the due ones with the store's compare-and-set (`fireSchedule`), sleep until the earliest next slot. Any number of processes run it
 * at once: a slot is enqueued by whichever fires it first; the others' compare fails and they read again.
 */
import { expBackoff } from '../model/backoff.js';
import { sleep } from '../model/time.js';
import { decodeBody, type ScheduleBody } from './body.js';
import { slotMessages } from './messages.js';
import { dueSlots, slotClock, type SlotClock } from './timing.js';
import type { Store, StoredSchedule } from '../stores/contract/contract.js';

/** Schedules are read again at least this often, to see new, changed and removed ones. */
export const RESCAN_MS = 2000;
// Between a lost compare-and-set and the read that follows it.
const AFTER_LOST_MS = 10;
const MAX_ERROR_BACKOFF_MS = 30_000;

/** A body read once per distinct text: parsing it and building its clock is not free. */
interface Parsed {
  readonly text: string;
  readonly body: ScheduleBody;
  readonly clock: SlotClock;
}

export class Scheduler {
  private readonly parsed = new Map<string, Parsed>();
  /** Bodies that could not be read, reported once each. */
  private readonly unreadable = new Set<string>();
  private failures = 0;
  /** Ends the current sleep: a schedule of the queue changed in this process. */
  private nudge = new AbortController();

  constructor(
    private readonly store: Store,
    private readonly queue: string,
    private readonly onError: (error: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** Runs until `signal` aborts; a firing under way when it does completes first. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let waitMs: number;
      try {
        waitMs = await this.pass(signal);
        this.failures = 0;
      } catch (error) {
        this.failures += 1;
        this.onError(error);
        waitMs = expBackoff(this.failures, { factor: 100, max: MAX_ERROR_BACKOFF_MS });
      }
      await sleep(waitMs, AbortSignal.any([signal, this.nudge.signal]));
      if (this.nudge.signal.aborted) this.nudge = new AbortController();
    }
  }

  /** Reads the schedules again now rather than at the next rescan. */
  wake(): void {
    this.nudge.abort();
  }

  /** One read and the firings it calls for; returns how long to sleep before the next. */
  async pass(signal?: AbortSignal): Promise<number> {
    const schedules = await this.store.schedules(this.queue);
    this.forgetRemoved(schedules);
    let waitMs = RESCAN_MS;
    for (const schedule of schedules) {
      if (signal?.aborted === true) break;
      const next = await this.fire(schedule);
      waitMs = Math.min(waitMs, next === null ? AFTER_LOST_MS : next - this.now());
    }
    return Math.max(AFTER_LOST_MS, waitMs);
  }

  /** Fires the schedule if due; returns its next slot, or null when another process changed it first. */
  private async fire(schedule: StoredSchedule): Promise<number | null> {
    const parsed = await this.parse(schedule);
    if (parsed === null) return Infinity;
    const due = dueSlots(parsed.clock, schedule.nextAt, this.now(), parsed.body.catchUp);
    if (due === null) return schedule.nextAt;
    const messages = slotMessages(schedule.name, parsed.body, due.slots);
    const results = await this.store.fireSchedule(this.queue, schedule, due.nextAt, messages);
    return results === null ? null : due.nextAt;
  }

  private async parse(schedule: StoredSchedule): Promise<Parsed | null> {
    const known = this.parsed.get(schedule.name);
    if (known?.text === schedule.body) return known;
    if (this.unreadable.has(schedule.body)) return null;
    try {
      const body = decodeBody(schedule.name, schedule.body);
      const parsed = { text: schedule.body, body, clock: await slotClock(body.timing) };
      this.parsed.set(schedule.name, parsed);
      return parsed;
    } catch (error) {
      this.unreadable.add(schedule.body);
      this.onError(error);
      return null;
    }
  }

  private forgetRemoved(schedules: readonly StoredSchedule[]): void {
    const names = new Set(schedules.map((s) => s.name));
    for (const name of this.parsed.keys()) if (!names.has(name)) this.parsed.delete(name);
  }
}
