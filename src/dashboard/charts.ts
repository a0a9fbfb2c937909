/**
 * A queue's last hour from its events: completed and failed per minute, and the failure rate. The work is
 * bounded by the queue's own retention (`eventsMaxCount`), and an answer is reused for a few seconds.
 */
import type { Client } from '../client/client.js';
import type { ChartData } from './wire.js';

export const CHART_MINUTES = 60;
const MINUTE_MS = 60_000;
const PAGE_LIMIT = 10_000;
const CACHE_MS = 5_000;

export class ChartSource {
  private readonly cache = new Map<string, { data: Promise<ChartData>; readAt: number }>();

  constructor(private readonly client: Client) {}

  lastHour(queue: string, now = Date.now()): Promise<ChartData> {
    const cached = this.cache.get(queue);
    if (cached !== undefined && now - cached.readAt < CACHE_MS) return cached.data;
    const data = this.read(queue, now);
    this.cache.set(queue, { data, readAt: now });
    // A failed read is not kept: the next request tries again.
    data.catch(() => this.cache.delete(queue));
    if (this.cache.size > 1000) this.cache.delete(this.cache.keys().next().value ?? '');
    return data;
  }

  private async read(queue: string, now: number): Promise<ChartData> {
    const config = await this.client.config(queue);
    if (!config.events) return { events: false };
    const first = Math.floor(now / MINUTE_MS) * MINUTE_MS - (CHART_MINUTES - 1) * MINUTE_MS;
    const completed = new Array<number>(CHART_MINUTES).fill(0);
    const failed = new Array<number>(CHART_MINUTES).fill(0);
    let after: string | undefined;
    let read = 0;
    let startsLate = false;
    while (read < config.eventsMaxCount) {
      const limit = Math.min(PAGE_LIMIT, config.eventsMaxCount - read);
      const page = await this.client.readEvents(queue, after === undefined ? { limit } : { after, limit });
      if (after === undefined && page.events[0] !== undefined && page.events[0].at > first) startsLate = true;
      for (const event of page.events) {
        const minute = Math.floor((event.at - first) / MINUTE_MS);
        if (minute < 0 || minute >= CHART_MINUTES) continue;
        if (event.type === 'completed') completed[minute] = (completed[minute] ?? 0) + 1;
        else if (event.type === 'failed') failed[minute] = (failed[minute] ?? 0) + 1;
      }
      read += page.events.length;
      if (page.events.length < limit) break;
      after = page.cursor;
    }
    return {
      events: true,
      minutes: completed.map((_, i) => first + i * MINUTE_MS),
      completed,
      failed,
      failureRate: completed.map((done, i) => {
        const bad = failed[i] ?? 0;
        return done + bad === 0 ? null : bad / (done + bad);
      }),
      // The oldest kept event is inside the hour, and the retention (count or age) may have dropped older ones.
      partial: startsLate && (read >= config.eventsMaxCount || config.eventsMaxAgeMs < CHART_MINUTES * MINUTE_MS),
    };
  }
}
