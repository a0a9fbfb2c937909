/**
 * etcdctl (3.4, Debian's etcd-client) runs one script of commands against a
 * real etcd and against `kvmq serve`: put/get/del, txn, watch, leases,
 * compaction, snapshot, endpoint status/health/hashkv, member list, auth,
 * lock and elect. Each command's exit code and output must match once the
 * parts that name a particular server are masked (endpoints, member, cluster
 * and lease IDs, durations, sizes, versions).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { etcdBesideServe, etcdctl } from './fixtures/serve-support.js';
import { waitFor } from './support/wait.js';

interface Ctx {
  readonly endpoint: string;
  readonly dir: string;
  lease: string;
  rev: number;
}

interface Step {
  readonly name: string;
  args(ctx: Ctx): string[];
  readonly input?: string;
  /** etcdctl exits non-zero against etcd: the step checks an error, which kvmq must print alike. */
  readonly fails?: true;
  /** Reads what later steps need (a lease ID, a revision) from this step's output. */
  capture?(ctx: Ctx, stdout: string): void;
}

/** Masks what differs between any two servers, keeping everything else. */
function mask(text: string, ctx: Ctx): string {
  return (
    text
      .replaceAll(ctx.endpoint, '<endpoint>')
      .replaceAll(ctx.dir, '<dir>')
      .replace(/"(cluster_id|member_id|leader|ID)":\d+/g, '"$1":<id>')
      // Lease and member IDs in hex, without leading zeros (their top bits are the member's low 16).
      .replace(/\b[0-9a-f]{12,16}\b/g, '<hex-id>')
      .replace(/took = [0-9.]+[µmn]?s/g, 'took = <duration>')
      .replace(/remaining\(\d+s\)/g, 'remaining(<s>)')
      .replace(/"(dbSize|dbSizeInUse|raftIndex|raftAppliedIndex)":\d+/g, '"$1":<n>')
      .replace(/"version":"[0-9.]+"/g, '"version":<v>')
      .replace(/"lease":\d+/g, '"lease":<id>')
      // kvmq serve has no peers, so its member has no peer URLs.
      .replace(/"peerURLs":\[[^\]]*\],/g, '')
      .split('\n')
      .filter((line) => !line.startsWith('{"level":'))
      .join('\n')
  );
}

const base: Step[] = [
  { name: 'put', args: () => ['put', 'foo', 'bar'] },
  { name: 'get', args: () => ['get', 'foo'] },
  { name: 'put --prev-kv', args: () => ['put', 'foo', 'baz', '--prev-kv'] },
  { name: 'get json', args: () => ['get', 'foo', '-w', 'json'] },
  { name: 'get missing', args: () => ['get', 'nothing'] },
  { name: 'put a/1', args: () => ['put', 'a/1', 'one'] },
  { name: 'put a/2', args: () => ['put', 'a/2', 'two'] },
  { name: 'put a/3', args: () => ['put', 'a/3', 'three'] },
  { name: 'get prefix', args: () => ['get', 'a/', '--prefix'] },
  { name: 'get sorted', args: () => ['get', 'a/', '--prefix', '--sort-by=MODIFY', '--order=DESCEND', '--limit=2'] },
  { name: 'get keys only', args: () => ['get', 'a/', '--prefix', '--keys-only'] },
  { name: 'get from key', args: () => ['get', 'a/2', '--from-key', '-w', 'json'] },
  { name: 'get range', args: () => ['get', 'a/1', 'a/3'] },
  { name: 'get rev', args: () => ['get', 'foo', '--rev=2'] },
  { name: 'get future rev', fails: true, args: () => ['get', 'foo', '--rev=1000'] },
  { name: 'get serializable', args: () => ['get', 'foo', '--consistency=s'] },
  {
    name: 'txn success',
    args: () => ['txn', '-w', 'json'],
    input: 'value("foo") = "baz"\n\nput foo qux\nget a/1\n\ndel a/3\n\n',
  },
  {
    name: 'txn failure',
    args: () => ['txn'],
    input: 'mod("a/1") > "100"\nversion("foo") = "1"\n\nput x y\n\nget a/ --prefix\nput z w\n\n',
  },
  { name: 'txn interactive-less', args: () => ['txn'], input: 'create("new") = "0"\n\nput new 1\n\n\n' },
  { name: 'del one', args: () => ['del', 'a/1'] },
  { name: 'del missing', args: () => ['del', 'nothing'] },
  { name: 'del prefix --prev-kv', args: () => ['del', 'a/', '--prefix', '--prev-kv'] },
  { name: 'get all', args: () => ['get', '', '--prefix', '-w', 'json'] },
  { name: 'endpoint hashkv', args: (c) => ['endpoint', 'hashkv', `--endpoints=${c.endpoint}`] },
  {
    name: 'compaction',
    args: () => ['get', 'foo', '-w', 'json'],
    capture: (c, out) => {
      c.rev = (JSON.parse(out) as { header: { revision: number } }).header.revision;
    },
  },
  { name: 'compact', args: (c) => ['compaction', String(c.rev - 2), '--physical'] },
  { name: 'get compacted', fails: true, args: () => ['get', 'foo', '--rev=2'] },
  { name: 'compact again', fails: true, args: (c) => ['compaction', String(c.rev - 3)] },
  { name: 'endpoint hashkv after compaction', args: (c) => ['endpoint', 'hashkv', `--endpoints=${c.endpoint}`] },
  {
    name: 'lease grant',
    args: () => ['lease', 'grant', '300'],
    capture: (c, out) => {
      c.lease = /lease ([0-9a-f]+) granted/.exec(out)?.[1] ?? '';
    },
  },
  { name: 'lease grant short', args: () => ['lease', 'grant', '1'] },
  { name: 'put with lease', args: (c) => ['put', 'leased', 'v', `--lease=${c.lease}`] },
  { name: 'put bad lease', fails: true, args: () => ['put', 'leased2', 'v', '--lease=123'] },
  { name: 'lease timetolive', args: (c) => ['lease', 'timetolive', c.lease, '--keys'] },
  { name: 'lease keep-alive once', args: (c) => ['lease', 'keep-alive', '--once', c.lease] },
  { name: 'lease revoke', args: (c) => ['lease', 'revoke', c.lease] },
  { name: 'lease timetolive gone', args: (c) => ['lease', 'timetolive', c.lease] },
  { name: 'lease revoke gone', fails: true, args: (c) => ['lease', 'revoke', c.lease] },
  { name: 'get leased', args: () => ['get', 'leased'] },
  { name: 'member list', args: () => ['member', 'list', '-w', 'json'] },
  { name: 'endpoint status', args: () => ['endpoint', 'status', '-w', 'json'] },
  { name: 'endpoint health', args: () => ['endpoint', 'health'] },
  { name: 'alarm list', args: () => ['alarm', 'list'] },
  { name: 'defrag', args: () => ['defrag'] },
  { name: 'lock', args: () => ['lock', 'mylock', 'echo', 'holding the lock'] },
  { name: 'snapshot save', args: (c) => ['snapshot', 'save', join(c.dir, 'snap.db')] },
  // Auth: a root user, a reader limited to a prefix.
  { name: 'auth enable without root', fails: true, args: () => ['auth', 'enable'] },
  { name: 'user add root', args: () => ['user', 'add', 'root:rootpw'] },
  { name: 'user grant-role root', args: () => ['user', 'grant-role', 'root', 'root'] },
  { name: 'role add reader', args: () => ['role', 'add', 'reader'] },
  { name: 'role grant read', args: () => ['role', 'grant-permission', 'reader', 'read', 'r/', '--prefix'] },
  { name: 'role grant write', args: () => ['role', 'grant-permission', 'reader', 'readwrite', 'r/own'] },
  { name: 'user add alice', args: () => ['user', 'add', 'alice:alicepw'] },
  { name: 'user grant-role alice', args: () => ['user', 'grant-role', 'alice', 'reader'] },
  { name: 'auth enable', args: () => ['auth', 'enable'] },
  { name: 'anonymous get', fails: true, args: () => ['get', 'foo'] },
  { name: 'wrong password', fails: true, args: () => ['--user=alice:nope', 'get', 'r/1'] },
  { name: 'root put', args: () => ['--user=root:rootpw', 'put', 'r/1', 'x'] },
  { name: 'alice get', args: () => ['--user=alice:alicepw', 'get', 'r/1'] },
  { name: 'alice get prefix', args: () => ['--user=alice:alicepw', 'get', 'r/', '--prefix'] },
  { name: 'alice put denied', fails: true, args: () => ['--user=alice:alicepw', 'put', 'r/1', 'y'] },
  { name: 'alice put own', args: () => ['--user=alice:alicepw', 'put', 'r/own', 'y'] },
  { name: 'alice get outside', fails: true, args: () => ['--user=alice:alicepw', 'get', 'foo'] },
  { name: 'alice user list denied', fails: true, args: () => ['--user=alice:alicepw', 'user', 'list'] },
  { name: 'role get', args: () => ['--user=root:rootpw', 'role', 'get', 'reader'] },
  { name: 'user get', args: () => ['--user=root:rootpw', 'user', 'get', 'alice'] },
  { name: 'user list', args: () => ['--user=root:rootpw', 'user', 'list'] },
  { name: 'role list', args: () => ['--user=root:rootpw', 'role', 'list'] },
  { name: 'role revoke', args: () => ['--user=root:rootpw', 'role', 'revoke-permission', 'reader', 'r/own'] },
  { name: 'alice put revoked', fails: true, args: () => ['--user=alice:alicepw', 'put', 'r/own', 'z'] },
  { name: 'user delete root denied', fails: true, args: () => ['--user=root:rootpw', 'user', 'delete', 'root'] },
  { name: 'auth disable', args: () => ['--user=root:rootpw', 'auth', 'disable'] },
  { name: 'get after auth disable', args: () => ['get', 'r/own'] },
];

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function runSteps(endpoint: string, dir: string): Promise<Outcome[]> {
  const ctx: Ctx = { endpoint, dir, lease: '', rev: 0 };
  const outcomes: Outcome[] = [];
  for (const step of base) {
    const result = await etcdctl(endpoint, step.args(ctx), step.input === undefined ? {} : { input: step.input });
    step.capture?.(ctx, result.stdout);
    outcomes.push({ code: result.code, stdout: mask(result.stdout, ctx), stderr: mask(result.stderr, ctx) });
  }
  return outcomes;
}

/** Runs a long-lived etcdctl (watch, elect) until its output has `lines` lines, then stops it. */
function runUntil(endpoint: string, args: string[], lines: number): Promise<string> {
  const child = spawn('etcdctl', [`--endpoints=${endpoint}`, ...args], {
    env: { ...process.env, ETCDCTL_API: '3' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return waitFor(() => out.split('\n').length > lines, { timeoutMs: 15_000, what: `${lines} lines from ${args[0]}` })
    .then(() => out)
    .finally(() => child.kill('SIGKILL'));
}

describe('etcdctl gets the same answers from kvmq serve as from etcd', () => {
  const servers = etcdBesideServe();

  test('each scripted etcdctl command prints and exits as it does against etcd', { timeout: 180_000 }, async () => {
    const [fromEtcd, fromKvmq] = await Promise.all([
      runSteps(servers.etcd.endpoint, servers.etcd.dir),
      runSteps(servers.kvmq.endpoint, servers.kvmq.dir),
    ]);
    for (const [i, step] of base.entries()) {
      const code = fromEtcd[i]?.code;
      assert.equal(code !== 0, step.fails === true, `step ${i} '${step.name}' exits ${code} against etcd`);
      assert.deepEqual(fromKvmq[i], fromEtcd[i], `step ${i} '${step.name}' (kvmq first, etcd second)`);
    }
    for (const server of [servers.etcd, servers.kvmq]) {
      const snapshot = join(server.dir, 'snap.db');
      assert.ok(existsSync(snapshot) && statSync(snapshot).size > 0, 'the snapshot was saved');
    }
  });

  test('watch from a past revision, then live events', { timeout: 60_000 }, async () => {
    const outputs: string[] = [];
    for (const server of [servers.etcd, servers.kvmq]) {
      const ep = server.endpoint;
      for (const [k, v] of [
        ['w/1', 'a'],
        ['w/2', 'b'],
        ['w/1', 'c'],
      ]) {
        await etcdctl(ep, ['put', k as string, v as string]);
      }
      await etcdctl(ep, ['del', 'w/2']);
      const rev = (
        JSON.parse((await etcdctl(ep, ['get', 'w/1', '-w', 'json'])).stdout) as { header: { revision: number } }
      ).header.revision;
      const watching = runUntil(ep, ['watch', 'w/', '--prefix', `--rev=${rev - 3}`, '--prev-kv'], 14);
      // A live event after the history.
      await waitFor(async () => (await etcdctl(ep, ['put', 'w/3', 'live'])).code === 0);
      outputs.push(await watching);
    }
    const [a = '', b = ''] = outputs;
    const firstLines = (text: string): string => text.split('\n').slice(0, 14).join('\n');
    assert.equal(firstLines(b), firstLines(a));
  });

  test('elect: a campaign leads, an observer sees the proposal', { timeout: 60_000 }, async () => {
    const outputs: string[] = [];
    for (const server of [servers.etcd, servers.kvmq]) {
      const campaign = runUntil(server.endpoint, ['elect', 'myelection', 'proposal-1'], 2);
      const first = await campaign;
      const observed = await runUntil(server.endpoint, ['elect', '-l', 'myelection'], 2);
      outputs.push(mask(first, { endpoint: server.endpoint, dir: server.dir, lease: '', rev: 0 }));
      outputs.push(mask(observed, { endpoint: server.endpoint, dir: server.dir, lease: '', rev: 0 }));
    }
    const [campaignEtcd, observedEtcd, campaignKvmq, observedKvmq] = outputs;
    assert.equal(campaignKvmq, campaignEtcd);
    assert.equal(observedKvmq, observedEtcd);
  });
});
