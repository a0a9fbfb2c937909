/**
 * kvmq serve's codecs are generated from etcd's vendored .proto files (scripts/proto.mjs); this fails
 * when the committed code is not what those files make, and checks the properties the server relies on.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Long from 'long';
import { etcdserverpb } from '../src/serve/proto/generated/etcd.js';
import { ETCD_METHODS } from '../src/serve/proto/generated/services.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

void test('src/serve/proto/generated/ (codecs and services.ts) is what npm run proto makes of proto/etcd/', () => {
  // Exits 1 and names the command to run when they differ.
  execFileSync(process.execPath, ['scripts/proto.mjs', '--check'], { cwd: ROOT, stdio: 'pipe' });
});

void test('a lease ID above 2^53 survives decoding, and bytes decode as Buffers without a copy', () => {
  const request = Buffer.from(
    etcdserverpb.PutRequest.encode({
      key: Buffer.from('k'),
      value: Buffer.from('v'),
      lease: Long.fromString('7587870931240826627'),
    }).finish(),
  );
  const decoded = etcdserverpb.PutRequest.decode(request);
  assert.equal(String(decoded.lease), '7587870931240826627');
  assert.ok(Buffer.isBuffer(decoded.value));
  assert.equal(decoded.value.buffer, request.buffer);
});

void test('services.ts lists all six services with their streaming shapes and gateway paths', () => {
  assert.deepEqual(
    [...new Set(ETCD_METHODS.map((m) => m.service))],
    ['KV', 'Watch', 'Lease', 'Cluster', 'Maintenance', 'Auth'],
  );
  const byPath = new Map(ETCD_METHODS.map((m) => [m.path, m]));
  assert.deepEqual(byPath.get('/etcdserverpb.KV/Range'), {
    path: '/etcdserverpb.KV/Range',
    service: 'KV',
    name: 'Range',
    requestType: 'etcdserverpb.RangeRequest',
    responseType: 'etcdserverpb.RangeResponse',
    requestStream: false,
    responseStream: false,
    httpPosts: ['/v3/kv/range'],
  });
  const watch = byPath.get('/etcdserverpb.Watch/Watch');
  assert.ok(watch?.requestStream === true && watch.responseStream);
  const snapshot = byPath.get('/etcdserverpb.Maintenance/Snapshot');
  assert.ok(snapshot?.requestStream === false && snapshot.responseStream);
  assert.deepEqual(byPath.get('/etcdserverpb.Auth/UserAdd')?.httpPosts, ['/v3/auth/user/add']);
  assert.deepEqual(byPath.get('/etcdserverpb.Lease/LeaseRevoke')?.httpPosts, [
    '/v3/lease/revoke',
    '/v3/kv/lease/revoke',
  ]);
});
