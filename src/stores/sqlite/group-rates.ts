/**
 * A queue's groupRateLimit within one claim: each group's next start time (`tat`, model/rate-limit.ts
 * spacedGrant) read once through `read`, a message of the group granted when that time has come, and the
 * groups charged (`charged()`) for the store to write back in the claim's transaction, so the limit holds across
 * every worker and process. Shared by the SQLite and PostgreSQL stores.
 */
import { spacedGrant } from '../../model/rate-limit.js';
import type { GroupRateCheck } from './claim-ready.js';
import type { RateLimit } from '../../model/types.js';

export class GroupRates implements GroupRateCheck {
  private readonly tats = new Map<string, number>();
  private readonly charges = new Set<string>();
  /** When a group refused now gets its next slot (Infinity: none refused). */
  wakeAt = Infinity;

  constructor(
    private readonly limit: RateLimit,
    private readonly now: number,
    /** The stored `tat` of a group (0 when none is stored). */
    private readonly read: (group: string) => number,
  ) {}

  take(group: string): boolean {
    const grant = spacedGrant(this.limit, this.tats.get(group) ?? this.read(group), this.now);
    this.tats.set(group, grant.tat);
    if (!grant.granted) {
      this.wakeAt = Math.min(this.wakeAt, Math.ceil(grant.tat));
      return false;
    }
    this.charges.add(group);
    return true;
  }

  /** The groups that started a message, with the `tat` to store for each. */
  charged(): [string, number][] {
    return [...this.charges].map((group) => [group, this.tats.get(group) ?? 0]);
  }
}
