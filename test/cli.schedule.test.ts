/** `kvmq schedule add|ls|rm` as a subprocess on temporary SQLite files: stdout, stderr, exit codes. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectExit, newStore } from './support/cli.js';

interface Listed {
  name: string;
  cron?: string;
  tz?: string;
  everyMs?: number;
  catchUp: number;
  nextAt: number;
  payload: unknown;
  metadata: Record<string, unknown>;
  priority: number;
  group: string | null;
  attempts?: number;
}

async function listed(store: string, queue: string): Promise<Listed[]> {
  const { stdout } = await expectExit(0, ['schedule', 'ls', queue, '--json'], { store });
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Listed);
}

describe('kvmq schedule', { concurrency: 4 }, () => {
  it('adds, lists and removes an --every schedule', async () => {
    const store = newStore();
    const before = Date.now();
    const added = await expectExit(0, ['schedule', 'add', 'jobs', 'tick', '--every', '90s', 'hello'], { store });
    assert.match(added.stdout, /^created tick {2}every 90000ms {2}next \S+Z {2}catch-up 1 {2}priority 0\n$/);
    const [info] = await listed(store, 'jobs');
    assert.ok(info);
    assert.equal(info.everyMs, 90_000);
    assert.equal(info.nextAt % 90_000, 0);
    assert.ok(info.nextAt > before && info.nextAt <= Date.now() + 90_000);
    assert.deepEqual(info.payload, { base64: Buffer.from('hello').toString('base64') }, 'CLI payloads are bytes');

    const text = await expectExit(0, ['schedule', 'ls', 'jobs'], { store });
    assert.equal(
      text.stdout,
      `tick  every 90000ms  next ${new Date(info.nextAt).toISOString()}  catch-up 1  priority 0\n`,
    );

    const removed = await expectExit(0, ['schedule', 'rm', 'jobs', 'tick'], { store });
    assert.equal(removed.stdout, 'removed tick\n');
    const again = await expectExit(1, ['schedule', 'rm', 'jobs', 'tick'], { store });
    assert.equal(again.stderr, "kvmq: no schedule 'tick' in queue 'jobs'\n");
    assert.deepEqual(await listed(store, 'jobs'), []);
  });

  it('adds a cron schedule in a time zone with options, and replaces it', async () => {
    const store = newStore();
    const args = ['schedule', 'add', 'jobs', 'nightly', '--cron', '0 3 * * *', '--tz', 'Europe/Berlin', '{"n":1}'];
    const options = ['--priority', '5', '--group', 'tenant-1', '--metadata', '{"by":"cron"}', '--attempts', '3'];
    const created = await expectExit(0, [...args, ...options, '--catch-up', '4', '--json'], { store });
    const result = JSON.parse(created.stdout) as { created: boolean; schedule: Listed };
    assert.equal(result.created, true);
    assert.equal(result.schedule.cron, '0 3 * * *');
    assert.equal(result.schedule.tz, 'Europe/Berlin');
    assert.equal(result.schedule.catchUp, 4);
    assert.equal(result.schedule.priority, 5);
    assert.equal(result.schedule.group, 'tenant-1');
    assert.deepEqual(result.schedule.metadata, { by: 'cron' });
    assert.equal(result.schedule.attempts, 3);
    // 03:00 in Berlin is 01:00 or 02:00 UTC.
    assert.match(new Date(result.schedule.nextAt).toISOString(), /T0[12]:00:00\.000Z$/);

    const replaced = await expectExit(0, ['schedule', 'add', 'jobs', 'nightly', '--every', '1h', 'x'], { store });
    assert.match(replaced.stdout, /^replaced nightly {2}every 3600000ms /);
    const [info] = await listed(store, 'jobs');
    assert.ok(info);
    assert.equal(info.everyMs, 3_600_000);
    assert.equal(info.cron, undefined);
    assert.equal(info.priority, 0, 'a replacement takes only the options it gives');
    const text = await expectExit(0, ['schedule', 'ls', 'jobs'], { store });
    assert.match(text.stdout, /^nightly {2}every 3600000ms {2}next /);
  });

  it('bad input exits 2 with one line saying what is allowed, and writes nothing', async () => {
    const store = newStore();
    const add = ['schedule', 'add', 'jobs', 'n'];
    const cases: [string[], RegExp][] = [
      [[...add, '--cron', 'every day'], /cron "every day" is invalid .*5 fields/],
      [[...add, '--cron', '61 * * * *'], /Invalid value for minute/],
      [[...add, '--cron', '* * * * *', '--tz', 'Mars/Base'], /not an IANA time zone/],
      [[...add, '--cron', '* * * * *', '--every', '1s'], /either --cron EXPR or --every DURATION/],
      [[...add, 'payload'], /either --cron EXPR or --every DURATION/],
      [[...add, '--every', '1s', '--tz', 'UTC'], /--tz goes with --cron/],
      [[...add, '--every', '0'], /--every must be a duration of at least 1 ms/],
      [[...add, '--every', '5x'], /such as 500ms, 30s/],
      [[...add, '--every', '1s', '--priority', '1001'], /priority must be a whole number from 0/],
      // The same parser and message as enqueue --priority.
      [[...add, '--every', '1s', '--priority=-1'], /--priority must be a whole number from 0 \(runs first/],
      [[...add, '--every', '1s', '--priority', 'high'], /--priority must be a whole number from 0 .* got 'high'/],
      [[...add, '--every', '1s', '--group', 'a b'], /group "a b" is invalid/],
      [[...add, '--every', '1s', '--catch-up', '0'], /--catch-up must be a whole number from 1 to 1000/],
      [[...add, '--every', '1s', '--catch-up', '1001'], /from 1 to 1000/],
      [[...add, '--every', '1s', '--nope'], /unknown option '--nope'/],
      [['schedule', 'add', 'jobs', 'bad name', '--every', '1s'], /schedule name "bad name" is invalid/],
      [['schedule', 'add', 'jobs'], /missing argument/],
      [['schedule', 'rm', 'jobs'], /missing argument/],
      [['schedule', 'ls'], /missing argument/],
      [['schedule', 'start', 'jobs'], /unknown subcommand 'start': use add, ls or rm/],
      [['schedule'], /missing subcommand/],
    ];
    for (const [args, message] of cases) {
      const result = await expectExit(2, args, { store });
      assert.match(result.stderr, /^kvmq: .+\nTry 'kvmq schedule --help' for usage\.\n$/, args.join(' '));
      assert.match(result.stderr, message, args.join(' '));
      assert.equal(result.stdout, '');
    }
    assert.deepEqual(await listed(store, 'jobs'), []);
  });

  it('kvmq work fires the schedules of its queue, and not with --no-schedules', async () => {
    const store = newStore();
    await expectExit(0, ['schedule', 'add', 'jobs', 'tick', '--every', '1s', 'beat'], { store });
    const off = await expectExit(0, ['work', 'jobs', '--exec', 'cat', '--no-schedules', '--idle-exit-ms', '2500'], {
      store,
    });
    assert.equal(off.stdout, '', 'nothing was enqueued, so nothing ran');
    const on = await expectExit(0, ['work', 'jobs', '--exec', 'cat', '--max', '2'], { store });
    // The first firing catches up with the slots missed meanwhile as one (catch-up 1), then one per second.
    assert.equal(on.stdout, 'beatbeat');
    const { stdout } = await expectExit(0, ['list', 'jobs', '--json'], { store });
    const ids = stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => (JSON.parse(line) as { id: string }).id);
    assert.ok(ids.length >= 2 && ids.every((id) => /^tick@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/.test(id)), stdout);
  });

  it('has help that names the three subcommands and the timing options', async () => {
    const { stdout } = await expectExit(0, ['schedule', '--help'], { store: newStore() });
    assert.match(stdout, /kvmq schedule add <queue> <name> \(--cron EXPR \[--tz ZONE\] \| --every DURATION\)/);
    assert.match(stdout, /kvmq schedule ls <queue>/);
    assert.match(stdout, /kvmq schedule rm <queue> <name>/);
    const main = await expectExit(0, ['--help'], { store: newStore() });
    assert.match(main.stdout, /^\s+schedule\s+add, list or remove repeatable schedules/m);
  });
});
