/**
 * The README's etcdctl recipe runs as written against `kvmq serve`, together with the lines the server
 * prints to try (etcdctl 3.4 refuses a flag and its environment variable at once): the block is taken from
 * README.md itself, the endpoint swapped for the server's, the real etcdctl on PATH.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { connect } from '../src/index.js';
import { killGroup, serveFromCli } from './fixtures/serve-cli.js';
import { waitFor } from './support/wait.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const README_ENDPOINT = '127.0.0.1:2379';
const dir = mkdtempSync(join(tmpdir(), 'kvmq-readme-etcdctl-'));
const groups: ChildProcess[] = [];
after(() => {
  // Each child leads a process group of its own: ending the group ends what it left in the background.
  for (const child of groups) killGroup(child);
  rmSync(dir, { recursive: true, force: true });
});

function etcdctlRecipe(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('```sh\n', readme.indexOf('## Any etcd client as producer and consumer'));
  assert.ok(start >= 0, 'the README has its etcdctl recipe');
  return readme
    .slice(start + '```sh\n'.length, readme.indexOf('```\n', start + 1))
    .trimEnd()
    .split('\n');
}

function run(script: string): { child: ChildProcess; out: () => string } {
  const child = spawn('bash', ['-c', script], { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  groups.push(child);
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (out += text));
  return { child, out: () => out };
}

test("the README's etcdctl recipe and kvmq serve's try lines work together", { timeout: 90_000 }, async () => {
  // A free port rather than the README's 2379, which something else may hold.
  const { out: banner, endpoint } = await serveFromCli(join(dir, 'data'), [
    '--listen',
    '127.0.0.1:0',
    '--no-dashboard',
  ]);
  const last = banner.findIndex((line) => line.includes('etcdctl ') && line.includes(' put ')) + 1;
  assert.notEqual(endpoint, '', banner.join('\n'));
  // What the server says to try, as a newcomer copies it: without the indent and `try:`.
  const tryLines = banner.slice(1, last).map((line) => line.replace(/^\s*(try:)?\s*/, ''));

  const recipe = etcdctlRecipe().map((line) => line.replaceAll(README_ENDPOINT, endpoint));
  const ack = recipe.findIndex((line) => line.startsWith('etcdctl del '));
  assert.ok(ack > 0, 'the recipe ends with the ack');
  const consumer = run(['set -e', ...recipe.slice(0, ack), ...tryLines].join('\n'));
  // The first delivery, shown by the watch (it came at registration, before the watch started).
  const delivered = await waitFor(
    () => /^\/queue\/jobs\/consumer\/worker-a\/(\d+)\/job-1\nhello$/m.exec(consumer.out()),
    { timeoutMs: 30_000, what: () => `the delivery of job-1 in:\n${consumer.out()}` },
  );
  assert.doesNotMatch(consumer.out(), /conflicting environment variable/);
  await waitFor(() => /^OK$/m.test(consumer.out()), { what: () => `the try line's put in:\n${consumer.out()}` });

  // The ack as written, in a shell with the recipe's export.
  const ackLine = (recipe[ack] ?? '').replace('<idx>', delivered[1] ?? '');
  const acked = spawnSync('bash', ['-c', `${recipe[0] ?? ''}\n${ackLine}`], { encoding: 'utf8' });
  assert.equal(acked.status, 0, acked.stderr);
  assert.match(acked.stdout, /^1$/m);
  const client = await connect(`etcd://${endpoint}`, { maintenance: false });
  try {
    await waitFor(async () => (await client.status('jobs', 'job-1'))?.state === 'done-awaiting-gc', {
      timeoutMs: 15_000,
      what: 'job-1 done',
    });
  } finally {
    await client.close();
  }
  // One delivery at a time: the ack frees worker-a for the message the try line produced.
  await waitFor(() => /^\/queue\/jobs\/consumer\/worker-a\/\d+\/hello\nworld$/m.test(consumer.out()), {
    timeoutMs: 15_000,
    what: () => `the delivery of hello in:\n${consumer.out()}`,
  });
});
