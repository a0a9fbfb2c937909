/**
 * `node --import tsx bench/postgres/cpu.ts [--store URL] [--messages N] [--rounds R] [--workers W] [--prefetch P]
 *   [--same-schema]`
 *
 * Where a processed message's CPU goes on PostgreSQL: a queue filled with N small messages (default 50,000, in
 * batches of 1,000, untimed) is drained by W workers (default 1) sharing concurrency 64 in this process, no-op
 * handlers, each worker claiming P messages ahead of its free slots (default 0), R rounds (default 3). Per round:
 * messages a second, the CPU every `postgres` process of this machine spent per message (the backends, the WAL
 * writer, autovacuum: read from /proc, so the server must run here), and this process's own CPU per message. Each
 * round runs in a fresh schema, dropped after it, unless --same-schema: then every round reuses one, as a queue
 * filled and drained again and again does, with the dead rows of the rounds before it. The store is the URL given, else $KVMQ_TEST_POSTGRES_URL (`node scripts/servers.mjs run
 * postgres -- node --import tsx bench/postgres/cpu.ts`).
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { connect } from '../../src/index.js';
import { describeMachine, fill, signal, table, whole } from '../common.js';
import { cpuByName, cpuSince } from '../process-cpu.js';
import { benchServerUrl, dropSchema } from './server.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    messages: { type: 'string', default: '50000' },
    rounds: { type: 'string', default: '3' },
    workers: { type: 'string', default: '1' },
    prefetch: { type: 'string', default: '0' },
    'same-schema': { type: 'boolean', default: false },
  },
});
const base = benchServerUrl(values.store);
const n = Number(values.messages);
const rounds = Number(values.rounds);
const workers = Number(values.workers);
const prefetch = Number(values.prefetch);
const CONCURRENCY = 64;
if (!Number.isInteger(workers) || workers < 1 || CONCURRENCY % workers !== 0) {
  throw new Error(`--workers must divide ${CONCURRENCY}`);
}
const queue = 'cpu';
const schemaOf = (round: number): string => `kvmq_cpu_${process.pid}_${values['same-schema'] ? 0 : round}`;

/** One round: fill, then drain with the workers while the CPU of PostgreSQL and of this process is read. */
async function round(schema: string): Promise<string[]> {
  const client = await connect(`${base}?schema=${schema}`, { maintenance: false });
  try {
    await fill(client, queue, n, 1000);
    const all = signal();
    let handled = 0;
    const running = Array.from({ length: workers }, () =>
      client.worker(
        queue,
        () => {
          handled += 1;
          if (handled === n) all.fire();
        },
        { concurrency: CONCURRENCY / workers, prefetch, autoStart: false },
      ),
    );
    const server = cpuByName('postgres');
    const own = process.cpuUsage();
    const started = performance.now();
    await Promise.all(running.map((w) => w.start()));
    await all.promise;
    const seconds = (performance.now() - started) / 1000;
    const serverMs = cpuSince('postgres', server);
    const ownUsed = process.cpuUsage(own);
    await Promise.all(running.map((w) => w.stop()));
    await client.clear(queue);
    return [
      `${whole.format(n / seconds)}/s`,
      ((serverMs * 1000) / n).toFixed(1),
      ((ownUsed.user + ownUsed.system) / n).toFixed(1),
      loadavg()[0]?.toFixed(2) ?? '-',
    ];
  } finally {
    await client.close();
  }
}

const machine = describeMachine();
const body: string[][] = [];
try {
  for (let r = 0; r < rounds; r++) {
    const row = await round(schemaOf(r));
    if (!values['same-schema']) await dropSchema(base, schemaOf(r));
    body.push([String(r + 1), ...row]);
    console.error(`bench: round ${r + 1}: ${row.join('  ')}`);
  }
} finally {
  if (values['same-schema']) await dropSchema(base, schemaOf(0));
}
console.log(machine);
console.log(
  `${whole.format(n)} messages a round, ${workers} worker(s) sharing concurrency ${CONCURRENCY}, ` +
    `${values['same-schema'] ? 'one schema for every round' : 'a fresh schema each round'}\n`,
);
console.log(
  table(['round', 'processed', 'PostgreSQL CPU µs/message', 'worker process CPU µs/message', 'load'], body, false),
);
