/** `kvmq work`: a worker that runs a shell command per message. */
import { constants } from 'node:os';
import type { Client, HandlerResult, Job, MonitorInfo, Worker, WorkerFilters } from '../../index.js';
import { expBackoff } from '../../model/backoff.js';
import { payloadBytes } from '../../model/payload.js';
import { RESULT_MAX_BYTES } from '../../model/result.js';
import { setLongTimeout, type LongTimeout } from '../../model/time.js';
import { expectPositionals, optionalWholeNumber, parseCommandLine, parseKeyValue } from '../args.js';
import type { Command } from '../command.js';
import { DURATION_HELP, optionalDuration } from '../duration.js';
import { EXIT_FAILURE, EXIT_OK, UsageError } from '../errors.js';
import { runShell, type ShellResult } from '../exec.js';
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
} as const;

/** sysexits.h's EX_TEMPFAIL: "try again later". */
const EX_TEMPFAIL = 75;

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
      ['--concurrency N', 'commands running at once (default 1)'],
      ['--prefetch N', 'messages claimed ahead, waiting for a free slot (default 0)'],
      ['--max N', 'exit after handling N messages'],
      ['--idle-exit-ms T', 'exit after T with nothing to do'],
      ['--lock-ms T', 'lock duration, renewed while the command runs (default 30s)'],
      ['--retry-backoff-ms T', 'wait T before a retry (default: exponential, 1-2 s first)'],
      ['--max-attempts N', 'retry a failing command until attempt N (default 1; a message may set its own)'],
      ['--timeout T', 'a command running longer is ended (SIGTERM, then SIGKILL) and its message failed'],
      ['--filter NAME=VALUE[:at_least]', "this worker's filter value; at_least also takes lower ones (repeatable)"],
      METRICS_OPTION_HELP,
      ['--no-schedules', "do not fire the queue's schedules (kvmq schedule); other workers still do"],
      ['--result-stdout', "keep a successful command's stdout (bytes, at most 64 KiB) as the message's result"],
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
    };
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
    this.worker = client.worker(queue, (job) => this.handle(job), {
      autoStart: false,
      concurrency: max === undefined ? settings.concurrency : Math.min(settings.concurrency, max),
      // --max bounds what is claimed as well: messages beyond it would only be given back.
      prefetch:
        max === undefined ? settings.prefetch : Math.min(settings.prefetch, Math.max(0, max - settings.concurrency)),
      // Left out when not given: the worker reads a present `undefined` as a value, not as "default".
      ...(settings.lockMs === undefined ? {} : { lockMs: settings.lockMs }),
      ...(settings.timeoutMs === undefined ? {} : { timeoutMs: settings.timeoutMs }),
      ...(settings.maxAttempts === undefined ? {} : { maxAttempts: settings.maxAttempts }),
      ...(settings.retryBackoffMs === undefined ? {} : { retryBackoffMs: settings.retryBackoffMs }),
      filters: settings.filters,
      schedules: settings.schedules,
      onError: reportBackgroundError,
      monitor: (info) => this.monitor(info),
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
    if (this.settings.max !== undefined && this.started >= this.settings.max) return { status: 'retry', backoffMs: 0 };
    this.started += 1;
    // The last one: a graceful stop lets it finish and gives back what was claimed ahead.
    if (this.started === this.settings.max) this.requestStop();
    this.running.add(`${job.id}#${job.attempt}`);
    const { exec, resultStdout } = this.settings;
    const result = await runShell(exec, payloadBytes(job.payload), jobEnv(job), job.signal, resultStdout);
    // The tally hears what the store kept from the worker: the timeout if it came first, nothing if the lock was lost.
    return outcomeOf(result, job.attempt, this.settings.retryBackoffMs);
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

function jobEnv(job: Job): NodeJS.ProcessEnv {
  return {
    ...process.env,
    KVMQ_QUEUE: job.queue,
    KVMQ_ID: job.id,
    KVMQ_ATTEMPT: String(job.attempt),
    KVMQ_METADATA: JSON.stringify(job.metadata),
  };
}

/** Exit 0 → success, 75 → retry, anything else (or a signal) → error; the stderr tail is the last error. */
function outcomeOf(result: ShellResult, attempt: number, retryBackoffMs: number | undefined): HandlerResult {
  if (result.code === 0) return successOf(result);
  const tail = result.stderrTail.trimEnd();
  const error = tail === '' ? describe(result) : `${describe(result)}\n${tail}`;
  if (result.code === EX_TEMPFAIL) return { status: 'retry', backoffMs: retryBackoffMs ?? expBackoff(attempt), error };
  // Thrown, so the attempts policy (--max-attempts, or the message's own) decides between a retry and failed.
  throw new CommandFailed(error);
}

/** A success; with --result-stdout, its stdout is the result (over RESULT_MAX_BYTES: the message fails, saying so). */
function successOf(result: ShellResult): HandlerResult {
  if (result.stdout === null) return { status: 'success' };
  if (result.stdoutBytes > RESULT_MAX_BYTES) {
    const error = `command's stdout is ${result.stdoutBytes} bytes, over the result limit of ${RESULT_MAX_BYTES} bytes`;
    return { status: 'error', error };
  }
  return { status: 'success', result: result.stdout };
}

/** A failed command, recorded as its text alone: the stack would only point into kvmq. */
class CommandFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandFailed';
    this.stack = message;
  }
}

function describe(result: ShellResult): string {
  return result.code === null
    ? `command was killed by ${result.signal ?? 'a signal'}`
    : `command exited with code ${result.code}`;
}
