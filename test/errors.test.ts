/**
 * kvmq's error vocabulary: every error class the package exports raises its own code, and every code is one
 * of KVMQ_ERROR_CODES, so a caller can switch on `error.code` without guessing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as kvmq from '../src/index.js';
import { ServeError } from '../src/serve/index.js';

/** One instance of every exported KvmqError subclass, built with arguments of the right shape. */
const samples: readonly kvmq.KvmqError[] = [
  new kvmq.StoreUrlError('m'),
  new kvmq.StoreAuthError('m'),
  new kvmq.StoreLimitError('m'),
  new kvmq.StoreUnavailableError('m'),
  new kvmq.StoreLayoutError('m'),
  new kvmq.PackageMissingError('a redis store', 'ioredis'),
  new kvmq.ZookeeperReplyError('m', undefined, true),
  new kvmq.PayloadTooLargeError(2, 1),
  new kvmq.FilterError('m'),
  new kvmq.ClosedError('client'),
  new kvmq.EventsMissedError('q', [], 'cursor'),
  new kvmq.TimeoutError('m'),
  new kvmq.MessageGoneError('q', 'id'),
  new kvmq.MetricsListenError('m'),
  new kvmq.TransactionError('m'),
  new kvmq.JobReportError('m'),
  new kvmq.CanceledError('q', 'id'),
  new kvmq.FlowRefusedError('q', 'id', 'queued'),
  new kvmq.ServeError('m'),
  new kvmq.DashboardServerError('m'),
];

test('every exported error class is sampled here', () => {
  const exported = Object.values(kvmq).filter(
    (value): value is typeof kvmq.KvmqError => typeof value === 'function' && value.prototype instanceof kvmq.KvmqError,
  );
  assert.ok(exported.length > 0);
  for (const errorClass of exported) {
    assert.ok(
      samples.some((sample) => sample.constructor === errorClass),
      `${errorClass.name} has no sample`,
    );
  }
});

test('each error class raises a distinct code from KVMQ_ERROR_CODES, and each code has a class', () => {
  const codes = samples.map((sample) => sample.code);
  assert.equal(new Set(codes).size, codes.length, `a code is shared: ${codes.join(', ')}`);
  assert.deepEqual([...codes].sort(), [...kvmq.KVMQ_ERROR_CODES].sort());
});

test("one class and code for anything over the store's limit; MessageTooLargeError, deprecated, is that class", () => {
  const payload = new kvmq.PayloadTooLargeError(2, 1);
  const message = new kvmq.PayloadTooLargeError(3, 1, { id: 'm' });
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- the alias is what is tested
  const alias = kvmq.MessageTooLargeError;
  assert.equal(alias, kvmq.PayloadTooLargeError);
  for (const error of [payload, message]) {
    assert.ok(error instanceof alias && error instanceof kvmq.PayloadTooLargeError);
    assert.equal(error.code, 'PAYLOAD_TOO_LARGE');
  }
  assert.deepEqual([payload.part, payload.id, payload.bytes], ['payload', undefined, 2]);
  assert.match(payload.message, /^payload is 2 bytes/);
  assert.deepEqual([message.part, message.id, message.bytes], ['message', 'm', 3]);
  assert.match(message.message, /^message m with its metadata is 3 bytes/);
});

test("kvmq/serve's ServeError is the one the package exports", () => {
  assert.equal(ServeError, kvmq.ServeError);
});

test('an error names its class and says whether retrying may help', () => {
  const transient = samples.filter((sample) => sample.transient).map((sample) => sample.name);
  assert.deepEqual(transient.sort(), ['StoreUnavailableError', 'TimeoutError', 'ZookeeperReplyError']);
  for (const sample of samples) assert.equal(sample.name, sample.constructor.name);
});
