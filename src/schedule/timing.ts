/**
 * When a schedule fires: a cron expression (croner, loaded on first use) in an IANA time zone, or a fixed
 * period aligned to multiples of itself since the epoch. Checked at the API boundary; a bad timing is a
 * TypeError that says what is allowed.
 */
import { checkKnownKeys, checkMs, checkPlainObject } from '../model/validate.js';

/** `{ cron, tz? }`: croner's syntax (5 or 6 fields, or a nickname such as `@daily`), in `tz` (default UTC). */
export interface CronTiming {
  readonly cron: string;
  readonly tz?: string;
  readonly everyMs?: never;
}

/** `{ everyMs }`: a slot at every multiple of `everyMs` since the epoch. */
export interface EveryTiming {
  readonly everyMs: number;
  readonly cron?: never;
  readonly tz?: never;
}

export type ScheduleTiming = CronTiming | EveryTiming;

/** A schedule's slots (ms since the epoch). */
export interface SlotClock {
  /** The first slot strictly after `t`; NEVER when there is none (a cron pinned to past years). */
  after(t: number): number;
  /** The slots in [from, upTo], only the latest `max` of them, oldest first. */
  latest(from: number, upTo: number, max: number): number[];
}

/** The nextAt of a schedule that has no slot left: the largest time a Date holds. */
export const NEVER = 8_640_000_000_000_000;

const TIMING_HELP = "give either { cron: '0 * * * *', tz?: 'Europe/Berlin' } or { everyMs: 60000 }";

type Croner = typeof import('croner');
let croner: Promise<Croner> | null = null;

/** croner, imported on the first cron schedule only. */
function loadCroner(): Promise<Croner> {
  croner ??= import('croner');
  return croner;
}

/** Checks a timing (croner parses the expression and zone) and returns it without extra keys. */
export async function checkTiming(value: unknown): Promise<ScheduleTiming> {
  const timing = checkPlainObject('schedule timing', value);
  checkKnownKeys('schedule timing', timing, ['cron', 'tz', 'everyMs']);
  const hasCron = timing.cron !== undefined;
  const hasEvery = timing.everyMs !== undefined;
  if (hasCron === hasEvery) throw new TypeError(`schedule timing: ${TIMING_HELP}, exactly one of the two`);
  if (hasEvery) {
    if (timing.tz !== undefined) throw new TypeError('schedule timing: tz goes with cron, not with everyMs');
    return { everyMs: checkMs('everyMs', timing.everyMs, 1) };
  }
  const cron = timing.cron;
  if (typeof cron !== 'string') throw new TypeError(`cron must be a string such as '*/5 * * * *', got ${typeof cron}`);
  const tz = timing.tz === undefined ? undefined : checkZone(timing.tz);
  await cronClock(cron, tz);
  return tz === undefined ? { cron } : { cron, tz };
}

function checkZone(tz: unknown): string {
  if (typeof tz === 'string' && tz !== '') {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: tz });
      return tz;
    } catch {
      // Reported below with what is allowed.
    }
  }
  throw new TypeError(`tz ${JSON.stringify(tz)} is not an IANA time zone; use a name such as 'Europe/Berlin' or 'UTC'`);
}

/** The slots of a checked timing. */
export async function slotClock(timing: ScheduleTiming): Promise<SlotClock> {
  return timing.everyMs !== undefined ? everyClock(timing.everyMs) : cronClock(timing.cron, timing.tz);
}

function everyClock(everyMs: number): SlotClock {
  return {
    after: (t) => (Math.floor(t / everyMs) + 1) * everyMs,
    latest(from, upTo, max) {
      const last = Math.floor(upTo / everyMs) * everyMs;
      const first = Math.max(Math.ceil(from / everyMs) * everyMs, last - (max - 1) * everyMs);
      const slots: number[] = [];
      for (let slot = first; slot <= last; slot += everyMs) slots.push(slot);
      return slots;
    },
  };
}

async function cronClock(cron: string, tz: string | undefined): Promise<SlotClock> {
  const { Cron } = await loadCroner();
  let job: InstanceType<Croner['Cron']>;
  let first: Date | null;
  try {
    // No callback: croner only computes times, it starts no timer.
    job = new Cron(cron, { timezone: tz ?? 'UTC' });
    first = job.nextRun();
  } catch (error) {
    const reason = error instanceof Error ? error.message.replace(/^Cron\w*: /, '') : String(error);
    throw new TypeError(
      `cron ${JSON.stringify(cron)} is invalid (${reason}); use 5 fields (minute hour day month weekday), ` +
        "6 with seconds first, or a nickname such as '@hourly'",
    );
  }
  if (job.getOnce() !== null) {
    throw new TypeError(`cron ${JSON.stringify(cron)} is a date, not a cron expression; for one run use runAt`);
  }
  if (first === null) throw new TypeError(`cron ${JSON.stringify(cron)} has no time left to fire`);
  return {
    after: (t) => job.nextRun(new Date(t))?.getTime() ?? NEVER,
    latest(from, upTo, max) {
      // Forward from `from` while that is short (the usual firing: one slot or a few)...
      const slots: number[] = [];
      let slot = job.nextRun(new Date(from - 1));
      while (slots.length < max) {
        if (slot === null || slot.getTime() > upTo) return slots;
        slots.push(slot.getTime());
        slot = job.nextRun(slot);
      }
      if (slot === null || slot.getTime() > upTo) return slots;
      // ...else back from upTo (one ms past it keeps a slot at upTo itself): a long downtime costs `max` steps.
      return job
        .previousRuns(max, new Date(upTo + 1))
        .map((date) => date.getTime())
        .filter((slot) => slot >= from && slot <= upTo)
        .reverse();
    },
  };
}

/**
 * What a firing at `now` does: the due slots it enqueues (the latest `catchUp` of those in [nextAt, now]) and
 * the schedule's next slot after now. Null when nothing is due yet.
 */
export function dueSlots(
  clock: SlotClock,
  nextAt: number,
  now: number,
  catchUp: number,
): { slots: number[]; nextAt: number } | null {
  if (now < nextAt) return null;
  return { slots: clock.latest(nextAt, now, catchUp), nextAt: clock.after(now) };
}
