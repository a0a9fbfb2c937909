/**
 * A ready monitor (Carmine's monitor-fn): warns through the worker's logger when the queue holds more than
 * `maxSize` messages, at most once per `warnBackoffMs` across every worker of the queue.
 */
import { HOUR } from '../model/time.js';
import { checkCount, checkMs } from '../model/validate.js';
import type { Monitor, MonitorInfo } from './options.js';

/** The turn the warning takes in the store, shared by every worker of the queue. */
const WARN_TURN = 'size-warning';

/**
 * A worker `monitor` that warns when the queue's size (messages waiting or held) passes `maxSize`.
 * The rate limit is kept in the store (`takeTurn`), so two workers in two processes do not both warn.
 * Polls under the size cost nothing; over it, a process asks the store at most once per `warnBackoffMs`
 * per queue (it remembers when it last asked), so a busy queue is not one more store call per poll.
 * @param maxSize warn above this many messages. @defaultValue 1000
 * @param warnBackoffMs at most one warning per this long, queue-wide. @defaultValue 6 hours
 */
export function queueSizeMonitor(maxSize = 1000, warnBackoffMs = 6 * HOUR): Monitor {
  checkCount('maxSize', maxSize, 0, Number.MAX_SAFE_INTEGER);
  checkMs('warnBackoffMs', warnBackoffMs, 1);
  // Per queue: when this process may ask the store again. One monitor may serve workers of many queues.
  const askAgainAt = new Map<string, number>();

  const warnOnce = async (info: MonitorInfo): Promise<void> => {
    try {
      if (await info.takeTurn(WARN_TURN, warnBackoffMs)) {
        info.logger.warn(
          `kvmq: queue ${info.queue} holds ${info.queueSize} messages, more than ${maxSize} ` +
            `(next warning in ${warnBackoffMs} ms at the earliest)`,
        );
      }
    } catch (error) {
      // The store was not asked after all: ask again on the next poll over the size.
      askAgainAt.delete(info.queue);
      throw error;
    }
  };

  return (info) => {
    if (info.queueSize <= maxSize) return undefined;
    const now = Date.now();
    if (now < (askAgainAt.get(info.queue) ?? 0)) return undefined;
    askAgainAt.set(info.queue, now + warnBackoffMs);
    return warnOnce(info);
  };
}
