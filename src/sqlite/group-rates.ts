/**
 * A queue's groupRateLimit within one claim: each group's next start time (`tat`, model/rate-limit.ts
 * spacedGrant) read once from kvmq_group_rates, a message of the group granted when that time has come, and the
 * new `tat` of each group charged written back in the claim's transaction, so the limit holds across every
 * worker and process.
 */
import { spacedGrant } from '../model/rate-limit.js';
import type { GroupRateCheck } from './claim-ready.js';
import type { Statements } from './statements.js';
import type { RateLimit } from '../model/types.js';

export class GroupRates implements GroupRateCheck {
  private readonly tats = new Map<string, number>();
  private readonly charged = new Set<string>();
  /** When a group refused now gets its next slot (Infinity: none refused). */
  wakeAt = Infinity;

  constructor(
    private readonly sql: Statements,
    private readonly queue: string,
    private readonly limit: RateLimit,
    private readonly now: number,
  ) {}

  take(group: string): boolean {
    const tat = this.tats.get(group) ?? (this.sql.groupRateTat.get(this.queue, group) as number | undefined) ?? 0;
    const grant = spacedGrant(this.limit, tat, this.now);
    this.tats.set(group, grant.tat);
    if (!grant.granted) {
      this.wakeAt = Math.min(this.wakeAt, Math.ceil(grant.tat));
      return false;
    }
    this.charged.add(group);
    return true;
  }

  /** Writes the charged groups' new `tat`. */
  store(): void {
    for (const group of this.charged) this.sql.setGroupRateTat.run(this.queue, group, this.tats.get(group) ?? 0);
  }
}
