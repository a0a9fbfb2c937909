/**
 * A queue's schedules in SQLite: one row per (queue, name). Firing compares the stored body and next_at and
 * sets next_at in the caller's IMMEDIATE transaction, the one that also enqueues the due slots, so two
 * processes firing the same slot cannot both succeed.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { StoredSchedule } from '../contract/contract.js';

const SQL = {
  exists: 'SELECT 1 FROM kvmq_schedules WHERE queue = ? AND name = ?',
  put: `INSERT INTO kvmq_schedules (queue, name, body, next_at) VALUES (@queue, @name, @body, @nextAt)
       ON CONFLICT (queue, name) DO UPDATE SET body = excluded.body, next_at = excluded.next_at`,
  list: 'SELECT name, body, next_at AS nextAt FROM kvmq_schedules WHERE queue = ? ORDER BY name',
  remove: 'DELETE FROM kvmq_schedules WHERE queue = ? AND name = ?',
  advance: `UPDATE kvmq_schedules SET next_at = @nextAt
       WHERE queue = @queue AND name = @name AND body = @body AND next_at = @expectedAt`,
} as const;

export class ScheduleTable {
  private readonly sql: { readonly [K in keyof typeof SQL]: BetterSqlite3.Statement };

  constructor(db: BetterSqlite3.Database) {
    this.sql = {
      exists: db.prepare(SQL.exists),
      put: db.prepare(SQL.put),
      list: db.prepare(SQL.list),
      remove: db.prepare(SQL.remove),
      advance: db.prepare(SQL.advance),
    };
  }

  /** Creates or replaces; true when it was created. Run inside a write transaction. */
  put(queue: string, schedule: StoredSchedule): boolean {
    const created = this.sql.exists.get(queue, schedule.name) === undefined;
    this.sql.put.run({ queue, name: schedule.name, body: schedule.body, nextAt: schedule.nextAt });
    return created;
  }

  list(queue: string): StoredSchedule[] {
    return this.sql.list.all(queue) as StoredSchedule[];
  }

  remove(queue: string, name: string): boolean {
    return this.sql.remove.run(queue, name).changes === 1;
  }

  /** The compare-and-set of a firing: true when `expected` was still stored and now has `nextAt`. */
  advance(queue: string, expected: StoredSchedule, nextAt: number): boolean {
    const params = { queue, name: expected.name, body: expected.body, expectedAt: expected.nextAt, nextAt };
    return this.sql.advance.run(params).changes === 1;
  }
}
