/** A queue's configuration, read only: what `kvmq config` sets, in words, each row marked with its key. */
import type { QueueConfig } from '../../model/types.js';
import { html, type Html } from '../html.js';
import { queuePath } from '../paths.js';
import type { PageContext } from './context.js';
import { count } from './format.js';

const NONE = html`<span class="muted">none</span>`;

export function configPanel(ctx: PageContext, config: QueueConfig): Html {
  const { rateLimit, groupConcurrency, groupRateLimit, keepDone, keepFailed, deadLetterQueue, filterEnums } = config;
  const rows: [key: keyof QueueConfig, label: string, value: Html | string][] = [
    ['paused', 'Paused', config.paused ? 'yes: workers claim nothing' : 'no'],
    [
      'rateLimit',
      'Rate limit',
      rateLimit === null ? NONE : `at most ${count(rateLimit.max)} per ${period(rateLimit.perMs)}`,
    ],
    [
      'groupConcurrency',
      'Group concurrency',
      groupConcurrency === null ? NONE : `at most ${count(groupConcurrency)} per group`,
    ],
    [
      'groupRateLimit',
      'Group rate limit',
      groupRateLimit === null
        ? NONE
        : `at most ${count(groupRateLimit.max)} per ${period(groupRateLimit.perMs)} per group`,
    ],
    ['gcLifetimeMs', 'Done kept for', period(config.gcLifetimeMs)],
    ['keepDone', 'Done kept at most', keptAtMost(keepDone)],
    ['failedLifetimeMs', 'Failed kept for', period(config.failedLifetimeMs)],
    ['keepFailed', 'Failed kept at most', keptAtMost(keepFailed)],
    ['gcIntervalMs', 'GC at most every', period(config.gcIntervalMs)],
    [
      'maxDeliveries',
      'Lost locks before failing',
      config.maxDeliveries === 0 ? 'never fails for them' : count(config.maxDeliveries),
    ],
    [
      'deadLetterQueue',
      'Dead-letter queue',
      deadLetterQueue === null
        ? NONE
        : html`<a class="mono" href="${queuePath(ctx.base, deadLetterQueue)}">${deadLetterQueue}</a>`,
    ],
    [
      'events',
      'Events',
      config.events ? `on: the newest ${count(config.eventsMaxCount)}, for ${period(config.eventsMaxAgeMs)}` : 'off',
    ],
    [
      'filterEnums',
      'Filter enums',
      Object.keys(filterEnums).length === 0 ? NONE : html`<span class="mono">${JSON.stringify(filterEnums)}</span>`,
    ],
  ];
  return html`<section class="panel" data-config-panel>
    <h2>Configuration <span class="muted">(kvmq config)</span></h2>
    <table class="fields">
      ${rows.map(
        ([key, label, value]) =>
          html`<tr>
            <th title="${key}">${label}</th>
            <td data-config="${key}">${value}</td>
          </tr>`,
      )}
    </table>
  </section>`;
}

/** A count to keep (keepDone, keepFailed): null keeps by age only; 0 keeps none, a setting, so not muted. */
function keptAtMost(keep: number | null): Html | string {
  if (keep === null) return html`<span class="muted">by age only</span>`;
  return keep === 0 ? 'none' : `the newest ${count(keep)}`;
}

/** '1 s', '5 min', '7 d', '250 ms': a duration in the largest unit that divides it. */
export function period(ms: number): string {
  if (ms % 86_400_000 === 0) return `${ms / 86_400_000} d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}
