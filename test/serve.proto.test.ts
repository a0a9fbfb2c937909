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

const ROOT = fileURLToPath(new URL('..', import.meta.url));

void test('src/serve/proto/generated/ is what npm run proto makes of proto/etcd/', () => {
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
