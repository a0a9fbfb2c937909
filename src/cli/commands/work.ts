/** `kvmq work`: a worker that runs a shell command per message. */
import { constants } from 'node:os';
import type {
  BatchOutcome,
  Client,
  HandlerResult,
  Job,
  MonitorInfo,
  Worker,
  WorkerFilters,
  WorkerOptions,
} from '../../index.js';
import { payloadBytes } from '../../model/payload.js';
import { RESULT_MAX_BYTES } from '../../model/result.js';
import { setLongTimeout, type LongTimeout } from '../../model/time.js';
import { WORKER_DEFAULTS } from '../../model/worker-defaults.js';
import { expectPositionals, optionalWholeNumber, parseCommandLine, parseKeyValue } from '../args.js';
import type { Command } from '../command.js';
import { DURATION_HELP, formatDuration, optionalDuration } from '../duration.js';
import { EXIT_FAILURE, EXIT_OK, UsageError } from '../errors.js';
import { runShell } from '../exec.js';
import { CommandFailed, outcomeOf } from '../exec-outcome.js';
import { allAborted, batchInput, batchOutcomeOf, batchStdoutLimit } from '../batch-exec.js';
import { commandUsage } from '../help.js';
import { checkMetricsAddress, METRICS_OPTION_HELP, serveMetrics } from '../metrics.js';
import { note } from '../output.js';
import { OutcomeTally, say } from '../outcome-tally.js';
import { reportBackgroundError, withClient } from '../store.js';

const OPTIONS = {
  exec: { type: 'string' },
  concurrency: { type: 'string' },
  prefetch: { type: 'string' },
  max: { type: 'string' },
  'idle-exit-ms': { type: 'string' },
  'lock-ms': { type: 'string' },
  'retry-backoff-ms': { type: 'string' },
  'max-attempts': { type: 'string' },
  timeout: { type: 'string' },
  filter: { type: 'string', multiple: true },
  metrics: { type: 'string' },
  'no-schedules': { type: 'boolean' },
  'result-stdout': { type: 'boolean' },
  batch: { type: 'string' },
  'batch-wait': { type: 'string' },
} as const;

interface WorkSettings {
  readonly exec: string;
  readonly concurrency: number;
  readonly prefetch: number;
  readonly max: number | undefined;
  readonly idleExitMs: number | undefined;
  readonly lockMs: number | undefined;
  readonly retryBackoffMs: number | undefined;
  readonly maxAttempts: number | undefined;
  readonly timeoutMs: number | undefined;
  readonly filters: WorkerFilters | undefined;
  readonly metrics: string | undefined;
  readonly schedules: boolean;
  readonly resultStdout: boolean;
  /** --batch: messages per command, or undefined for one each. */
  readonly batch: number | undefined;
  readonly batchWaitMs: number;
}

export const work: Command = {
  name: 'work',
  summary: 'run a shell command for each message of a queue',
  usage: commandUsage(
    'work <queue> --exec CMD [options]',
    'Runs `sh -c CMD` for each message, with the payload on its stdin and KVMQ_QUEUE, KVMQ_ID,\n' +
      'KVMQ_ATTEMPT and KVMQ_METADATA (JSON) in its environment. Exit 0 is success, 75 (EX_TEMPFAIL)\n' +
      'asks for a retry, anything else is an error (retried until --max-attempts), recorded with the end of\n' +
      "the command's stderr. " +
      'Each failed or retried attempt gets a line on stderr, and a summary comes at exit. Exits 0 when\n' +
      'every handled message succeeded, 1 when at least one failed for good. The first SIGINT/SIGTERM\n' +
      'lets running commands finish; a second one stops at once (exit 128 + the signal number),\n' +
      'handing unfinished messages back to the queue.',
    [
      ['--exec CMD', 'the command to run per message (required)'],
      ['--concurrency N', `commands running at once (default ${WORKER_DEFAULTS.concurrency})`],
      ['--prefetch N', `messages claimed ahead, waiting for a free slot (default ${WORKER_DEFAULTS.prefetch})`],
      ['--max N', 'exit after handling N messages'],
      ['--idle-exit-ms T', 'exit after T with nothing to do'],
      [
        '--lock-ms T',
        `lock duration, renewed while the command runs (default ${formatDuration(WORKER_DEFAULTS.lockMs)})`,
      ],
      ['--retry-backoff-ms T', 'wait T before a retry (default: exponential, 1-2 s first)'],
      [
        '--max-attempts N',
        `retry a failing command until attempt N (default ${WORKER_DEFAULTS.maxAttempts}; a message may set its own)`,
      ],
      ['--timeout T', 'a command running longer is ended (SIGTERM, then SIGKILL) and its message failed'],
      ['--filter NAME=VALUE[:at_least]', "this worker's filter value; at_least also takes lower ones (repeatable)"],
      METRICS_OPTION_HELP,
      ['--no-schedules', "do not fire the queue's schedules (kvmq schedule); other workers still do"],
      ['--result-stdout', "keep a successful command's stdout (bytes, at most 64 KiB) as the message's result"],
      ['--batch N', 'give each command up to N messages, a JSON array on stdin (see docs/cli.md)'],
      ['--batch-wait T', 'with fewer than N ready, wait at most T for more (default 0: take what is ready)'],
      DURATION_HELP,
    ],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS);
    expectPositionals(positionals, 1, 1, '<queue>');
    if (values.exec === undefined) throw new UsageError('missing --exec CMD: the command to run for each message');
    const settings: WorkSettings = {
      exec: values.exec,
      concurrency: optionalWholeNumber('--concurrency', values.concurrency, 1) ?? 1,
      prefetch: optionalWholeNumber('--prefetch', values.prefetch) ?? 0,
      max: optionalWholeNumber('--max', values.max, 1),
      idleExitMs: optionalDuration('--idle-exit-ms', values['idle-exit-ms'], 0),
      lockMs: optionalDuration('--lock-ms', values['lock-ms'], 100),
      retryBackoffMs: optionalDuration('--retry-backoff-ms', values['retry-backoff-ms'], 0),
      maxAttempts: optionalWholeNumber('--max-attempts', values['max-attempts'], 1),
      timeoutMs: optionalDuration('--timeout', values.timeout),
      filters: parseWorkerFilters(values.filter),
      metrics: checkMetricsAddress(values.metrics),
      schedules: values['no-schedules'] !== true,
      resultStdout: values['result-stdout'] === true,
      batch: optionalWholeNumber('--batch', values.batch, 1),
      batchWaitMs: optionalDuration('--batch-wait', values['batch-wait'], 0) ?? 0,
    };
    if (settings.batch === undefined && values['batch-wait'] !== undefined) {
      throw new UsageError('--batch-wait needs --batch N');
    }
    if (settings.batch !== undefined && settings.resultStdout) {
      throw new UsageError("--result-stdout does not go with --batch: a batch command's stdout is its outcomes");
    }
    const queue = positionals[0] ?? '';
    return withClient(
      values.store,
      async (client) => {
        const run = new WorkRun(client, queue, settings);
        // Served before the worker starts: a taken port stops the command before any message is claimed.
        const metrics =
          settings.metrics === undefined
            ? null
            : await serveMetrics(await client.metrics({ queues: [queue] }), settings.metrics);
        try {
          return await run.run();
        } finally {
          await metrics?.close();
        }
      },
      {},
      { workers: true },
    );
  },
};

/** `--filter name=value[:method]`; a method-less value is matched exactly. */
function parseWorkerFilters(pairs: readonly string[] | undefined): WorkerFilters | undefined {
  if (pairs === undefined || pairs.length === 0) return undefined;
  const filters = new Map<string, { value: string; method: 'absolute' | 'at_least' }>();
  for (const pair of pairs) {
    const [name, spec] = parseKeyValue('--filter', pair);
    const colon = spec.lastIndexOf(':');
    const value = colon < 0 ? spec : spec.slice(0, colon);
    const method = colon < 0 ? 'absolute' : spec.slice(colon + 1);
    if (method !== 'absolute' && method !== 'at_least') {
      throw new UsageError(`--filter ${name}: the method must be 'absolute' or 'at_least', got '${method}'`);
    }
    if (filters.has(name)) throw new UsageError(`--filter ${name} is given twice`);
    filters.set(name, { value, method });
  }
  return Object.fromEntries(filters);
}

/** One run of the worker, until --max, --idle-exit-ms or a signal stops it. */
class WorkRun {
  private readonly worker: Worker;
  private readonly tally: OutcomeTally;
  /** `id#attempt` of the commands started and not yet told of: the outcomes this run counts. */
  private readonly running = new Set<string>();
  private started = 0;
  private idleTimer: LongTimeout | null = null;
  private stopping: Promise<void> | null = null;
  private forcedBy: NodeJS.Signals | null = null;
  private stopRequested: (stopped: Promise<void>) => void = () => undefined;
  /** Settles once a stop was asked for and the worker has stopped. */
  private readonly stopped = new Promise<void>((resolve) => (this.stopRequested = resolve));
  /** Signals that came while the worker was starting, acted on once it has started. */
  private earlySignals: NodeJS.Signals[] | null = [];
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    if (this.earlySignals !== null) this.earlySignals.push(signal);
    else if (this.stopping === null) {
      note(`${signal}: stopping once running commands finish (send it again to stop at once)`);
      this.requestStop();
    } else {
      this.forcedBy = signal;
      note(`${signal}: stopping now; unfinished messages go back to the queue`);
      this.worker.stop().catch(reportBackgroundError);
    }
  };

  constructor(
    client: Client,
    queue: string,
    private readonly settings: WorkSettings,
  ) {
    const { max } = settings;
    // With --batch, concurrency counts commands, each of up to `perCall` messages.
    const perCall = max === undefined ? (settings.batch ?? 1) : Math.min(settings.batch ?? 1, max);
    const calls = max === undefined ? settings.concurrency : Math.min(settings.concurrency, Math.ceil(max / perCall));
    const options: WorkerOptions = {
      autoStart: false,
      concurrency: calls,
      // --max bounds what is claimed as well: messages beyond it would only be given back.
      prefetch: max === undefined ? settings.prefetch : Math.min(settings.prefetch, Math.max(0, max - calls * perCall)),
      // Undefined when not given: the worker then takes its default.
      lockMs: settings.lockMs,
      timeoutMs: settings.timeoutMs,
      maxAttempts: settings.maxAttempts,
      retryBackoffMs: settings.retryBackoffMs,
      filters: settings.filters,
      schedules: settings.schedules,
      onError: reportBackgroundError,
      monitor: (info) => this.monitor(info),
    };
    this.worker =
      settings.batch === undefined
        ? client.worker(queue, (job) => this.handle(job), options)
        : client.worker(queue, (jobs) => this.handleBatch(jobs), {
            ...options,
            batch: { size: perCall, waitMs: settings.batchWaitMs },
          });
    this.tally = new OutcomeTally(this.worker, (id, attempt) => this.running.delete(`${id}#${attempt}`));
  }

  /** Resolves with the exit code. */
  async run(): Promise<number> {
    // Listening before the start: the first message's command may already be running (and its
    // caller signalling us) when start() resolves. A stop during start() would race with it, so
    // signals wait for it.
    process.on('SIGINT', this.onSignal);
    process.on('SIGTERM', this.onSignal);
    try {
      await this.worker.start();
      const early = this.earlySignals ?? [];
      this.earlySignals = null;
      for (const signal of early) this.onSignal(signal);
      await this.stopped;
    } finally {
      process.off('SIGINT', this.onSignal);
      process.off('SIGTERM', this.onSignal);
      this.disarmIdle();
    }
    say(this.tally.summary());
    if (this.forcedBy !== null) return 128 + constants.signals[this.forcedBy];
    return this.tally.failed > 0 ? EXIT_FAILURE : EXIT_OK;
  }

  private async handle(job: Job): Promise<HandlerResult> {
    // With concurrency > 1 the last claim may overshoot --max: hand the extra messages back at once, unrun.
    if (!this.take(job)) return UNRUN;
    const { exec, resultStdout } = this.settings;
    const stdout = resultStdout ? { keep: RESULT_MAX_BYTES } : {};
    const result = await runShell(exec, payloadBytes(job.payload), jobEnv(job), job.signal, stdout);
    // The tally hears what the store kept from the worker: the timeout if it came first, nothing if the lock was lost.
    return outcomeOf(result, job.attempt, this.settings.retryBackoffMs);
  }

  /** --batch: one command for the messages within --max, the others handed back unrun. */
  private async handleBatch(jobs: readonly Job[]): Promise<BatchOutcome> {
    const taken = jobs.map((job) => this.take(job));
    const run = jobs.filter((_, i) => taken[i]);
    if (run.length === 0) return UNRUN;
    const { exec, retryBackoffMs } = this.settings;
    const env = { ...process.env, KVMQ_QUEUE: run[0]?.queue, KVMQ_BATCH_SIZE: String(run.length) };
    // Ended once no message is ours any more (a timeout, a forced stop): one lost lock leaves the others running.
    const signal = allAborted(run.map((job) => job.signal));
    const stdout = { keep: batchStdoutLimit(run.length), passThrough: false };
    const result = await runShell(exec, batchInput(run), env, signal, stdout);
    const outcomes = batchOutcomeOf(result, run, retryBackoffMs);
    if (run.length === jobs.length) return outcomes;
    // Spread back over the whole batch, the unrun ones in their places.
    const each = Array.isArray(outcomes) ? [...(outcomes as readonly (HandlerResult | undefined)[])] : null;
    if (each !== null && each.length !== run.length) {
      throw new CommandFailed(`command returned ${each.length} outcome(s) for ${run.length} message(s)`);
    }
    return jobs.map((_, i) =>
      taken[i] ? (each === null ? (outcomes as HandlerResult | undefined) : each.shift()) : UNRUN,
    );
  }

  /** Counts the message against --max, or says it is one too many (handed back unrun). */
  private take(job: Job): boolean {
    if (this.settings.max !== undefined && this.started >= this.settings.max) return false;
    this.started += 1;
    // The last one: a graceful stop lets it finish and gives back what was claimed ahead.
    if (this.started === this.settings.max) this.requestStop();
    this.running.add(`${job.id}#${job.attempt}`);
    return true;
  }

  private monitor(info: MonitorInfo): void {
    const { idleExitMs } = this.settings;
    // Idle: this poll claimed nothing and nothing is in flight. Later dry polls keep the first deadline.
    if (info.claimed.length > 0 || info.inFlight > 0) this.disarmIdle();
    else if (idleExitMs !== undefined && this.idleTimer === null) {
      this.idleTimer = setLongTimeout(() => {
        this.idleTimer = null;
        if (this.worker.inFlight === 0) this.requestStop();
      }, idleExitMs);
    }
  }

  private requestStop(): void {
    if (this.stopping !== null) return;
    this.stopping = this.worker.stop();
    this.stopRequested(this.stopping);
  }

  private disarmIdle(): void {
    this.idleTimer?.clear();
    this.idleTimer = null;
  }
}

/** A message past --max, handed back at once: its attempt is not counted as handled. */
const UNRUN: HandlerResult = { status: 'retry', backoffMs: 0 };

function jobEnv(job: Job): NodeJS.ProcessEnv {
  return {
    ...process.env,
    KVMQ_QUEUE: job.queue,
    KVMQ_ID: job.id,
    KVMQ_ATTEMPT: String(job.attempt),
    KVMQ_METADATA: JSON.stringify(job.metadata),
  };
}
