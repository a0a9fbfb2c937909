/**
 * Periodic compaction, as etcd's `--auto-compaction-mode=periodic`: the
 * revision is sampled every tenth of the retention, and the history older
 * than the retention is compacted away. A queue writes several revisions per
 * message, so without it the history (and the file) would only grow.
 */
import { timerDelay } from '../../model/time.js';

export interface AutoCompactTarget {
  readonly currentRev: number;
  readonly compactRev: number;
  compact(revision: number): Promise<unknown>;
}

export class AutoCompactor {
  private readonly samples: { at: number; rev: number }[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly target: AutoCompactTarget,
    private readonly retentionMs: number,
    private readonly log: (message: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.timer = setInterval(() => this.tick(), timerDelay(Math.max(1000, retentionMs / 10)));
    this.timer.unref();
    this.samples.push({ at: now(), rev: target.currentRev });
  }

  private tick(): void {
    const now = this.now();
    this.samples.push({ at: now, rev: this.target.currentRev });
    // The newest sample at least `retention` old is what may go.
    let due: { at: number; rev: number } | undefined;
    while (this.samples.length > 0 && now - (this.samples[0] as { at: number }).at >= this.retentionMs) {
      due = this.samples.shift();
    }
    if (due === undefined || due.rev <= this.target.compactRev) return;
    this.target.compact(due.rev).catch((error: unknown) => {
      this.log(
        `automatic compaction at revision ${due.rev} failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    });
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
