/**
 * The dashboard's one script: live counts by server-sent events, and the last hour's charts with uPlot.
 * Pages read fine without it.
 */
import uPlot from 'uplot';
import type { ChartData, LiveQueue } from '../wire.js';

const numberFormat = new Intl.NumberFormat('en-US');

function setText(selector: string, text: string): void {
  for (const element of document.querySelectorAll<HTMLElement>(selector)) showText(element, text);
}

function showText(element: HTMLElement, text: string): void {
  if (element.textContent === text) return;
  element.textContent = text;
  element.classList.remove('changed');
  // Reading the layout restarts the animation.
  element.getBoundingClientRect();
  element.classList.add('changed');
}

/** A count, with the noun the page gave it (data-one, data-many) agreeing: '1 message', '2 messages'. */
function setCount(selector: string, n: number): void {
  const number = numberFormat.format(n);
  for (const element of document.querySelectorAll<HTMLElement>(selector)) {
    const { one, many } = element.dataset;
    const noun = n === 1 ? one : many;
    showText(element, noun === undefined ? number : `${number} ${noun}`);
  }
}

function attr(value: string): string {
  return CSS.escape(value);
}

function applyLive(queues: readonly LiveQueue[]): void {
  for (const q of queues) {
    const name = attr(q.queue);
    for (const [state, n] of Object.entries(q.counts)) {
      setText(`[data-count="${name}"][data-state="${attr(state)}"]`, numberFormat.format(n));
    }
    setCount(`[data-total="${name}"]`, q.total);
    setCount(`[data-consumers="${name}"]`, q.consumers);
    for (const badge of document.querySelectorAll<HTMLElement>(`[data-paused="${name}"]`)) {
      badge.textContent = q.paused ? 'paused' : 'active';
      badge.classList.toggle('paused', q.paused);
      badge.classList.toggle('active', !q.paused);
    }
  }
}

function startLive(): void {
  const url = document.body.dataset.live;
  const dot = document.querySelector<HTMLElement>('.live-dot');
  if (url === undefined) return;
  const source = new EventSource(url);
  source.onopen = () => {
    if (dot !== null) {
      dot.hidden = false;
      dot.classList.remove('off');
    }
  };
  source.onmessage = (event: MessageEvent<string>) => applyLive(JSON.parse(event.data) as LiveQueue[]);
  source.onerror = () => dot?.classList.add('off');
  window.addEventListener('pagehide', () => source.close());
}

const COLORS = { completed: '#2f9e66', failed: '#d6453d', rate: '#b7791f' };

function drawChart(container: HTMLElement, data: Extract<ChartData, { events: true }>): void {
  container.textContent = '';
  const total = data.completed.reduce((a, b) => a + b, 0);
  const failed = data.failed.reduce((a, b) => a + b, 0);
  const summary = document.createElement('p');
  summary.className = 'chart-summary';
  const rate = total + failed === 0 ? '–' : `${((100 * failed) / (total + failed)).toFixed(1)}%`;
  summary.textContent = `${numberFormat.format(total)} completed · ${numberFormat.format(failed)} failed · failure rate ${rate}${data.partial ? ' · older events trimmed' : ''}`;
  container.append(summary);
  const plotBox = document.createElement('div');
  container.append(plotBox);
  const bars = uPlot.paths.bars?.({ size: [0.7, 40], align: 0 });
  const options: uPlot.Options = {
    width: Math.max(240, container.clientWidth),
    height: 170,
    legend: { show: true, live: false },
    cursor: { points: { show: false } },
    scales: { x: { time: true }, rate: { range: [0, 100] } },
    axes: [
      { stroke: '#667085', grid: { show: false }, ticks: { stroke: '#d0d5dd' } },
      { stroke: '#667085', grid: { stroke: '#eef0f3' }, ticks: { show: false }, size: 44 },
      {
        scale: 'rate',
        // uPlot's Axis.Side is a const enum in its types only: the bundle needs its value, 1 (right).
        // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment
        side: 1,
        stroke: COLORS.rate,
        grid: { show: false },
        size: 52,
        values: (_u, ticks) => ticks.map((t) => `${t}%`),
      },
    ],
    series: [
      {},
      {
        label: 'Completed',
        stroke: COLORS.completed,
        fill: `${COLORS.completed}cc`,
        width: 0,
        ...(bars === undefined ? {} : { paths: bars }),
      },
      {
        label: 'Failed',
        stroke: COLORS.failed,
        fill: `${COLORS.failed}dd`,
        width: 0,
        ...(bars === undefined ? {} : { paths: bars }),
      },
      {
        label: 'Failure rate',
        scale: 'rate',
        stroke: COLORS.rate,
        width: 1.5,
        spanGaps: false,
        points: { show: true, size: 5, fill: COLORS.rate },
        value: (_u, v: number | null) => (v === null ? '–' : `${v.toFixed(1)}%`),
      },
    ],
  };
  const plot = new uPlot(
    options,
    [
      data.minutes.map((m) => m / 1000),
      [...data.completed],
      [...data.failed],
      data.failureRate.map((r) => (r === null ? null : r * 100)),
    ],
    plotBox,
  );
  new ResizeObserver(() => plot.setSize({ width: Math.max(240, container.clientWidth), height: 170 })).observe(
    container,
  );
}

async function loadChart(container: HTMLElement): Promise<void> {
  const url = container.dataset.chart;
  if (url === undefined) return;
  try {
    const response = await fetch(url, { credentials: 'same-origin' });
    const data = (await response.json()) as ChartData | { readonly error: string };
    if ('error' in data) throw new Error(data.error);
    if (!data.events) container.textContent = 'Queue events are off for this queue.';
    else drawChart(container, data);
  } catch (error) {
    container.textContent = `The chart could not load: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function start(): void {
  startLive();
  for (const chart of document.querySelectorAll<HTMLElement>('[data-chart]')) void loadChart(chart);
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
