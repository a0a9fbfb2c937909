/**
 * Whether a dispatcher still gets its work done. It sees every store call the dispatcher makes (reads and
 * Txns go through `kv`) and says the dispatcher is stalled when calls have been under way or failing for
 * `stallMs` with none answered: its Txns fail forever, or an awaited call never returns. An idle queue makes
 * no calls, so it never stalls; neither does a busy one whose calls are answered.
 */
import type { Kv } from '../kv.js';

// No call made for this long after the last one failed: nothing is being retried, so nothing waits.
const MAX_QUIET_MS = 5000;

export class ProgressWatch {
  readonly kv: Kv;
  private underWay = 0;
  /** Since when calls have been made and none answered; null while there is nothing unanswered. */
  private since: number | null = null;
  private lastSettled = 0;
  private lastError: string | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(
    inner: Kv,
    private readonly stallMs: number,
    private readonly stalled: (why: string) => void,
  ) {
    this.kv = {
      range: (op) => this.track(() => inner.range(op)),
      txn: (request) => this.track(() => inner.txn(request)),
      watch: (request, handler) => inner.watch(request, handler),
      session: inner.session,
    };
    this.timer = setInterval(() => this.check(), Math.max(100, Math.min(1000, stallMs / 4)));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async track<T>(call: () => Promise<T>): Promise<T> {
    this.underWay += 1;
    this.since ??= Date.now();
    try {
      const answer = await call();
      this.since = this.underWay > 1 ? Date.now() : null;
      this.lastError = null;
      return answer;
    } catch (error) {
      this.lastError = error instanceof Error ? error.message : String(error);
      throw error;
    } finally {
      this.underWay -= 1;
      this.lastSettled = Date.now();
    }
  }

  private check(): void {
    if (this.since === null) return;
    const now = Date.now();
    if (this.underWay === 0 && now - this.lastSettled > Math.min(MAX_QUIET_MS, this.stallMs / 2)) {
      this.since = null;
      return;
    }
    if (now - this.since < this.stallMs) return;
    this.stop();
    const failing = this.lastError === null ? '' : `, the last failed: ${this.lastError}`;
    this.stalled(`no store call answered for ${now - this.since} ms (${this.underWay} under way${failing})`);
  }
}
