/**
 * A store URL that cannot be used is refused with a StoreUrlError before anything connects, and its message
 * never shows the password, whatever the scheme and however the password is written.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, StoreUrlError } from '../src/index.js';
import { redactUrl } from '../src/stores/contract/url-options.js';

const SECRET = 's3cret';

void test('a bad URL of every scheme is refused without its password', async () => {
  const urls = [
    `redis://user:${SECRET}@127.0.0.1:notaport`,
    `rediss://:${SECRET}/x@127.0.0.1:6379?bogus=1`,
    `redis://:${SECRET}@127.0.0.1:6379?bogus=1`,
    `postgres://user:${SECRET}@127.0.0.1/db?bogus=1`,
    `postgresql://user:${SECRET}@@127.0.0.1:99999/db`,
    `etcd://user:${SECRET}@127.0.0.1:2379?bogus=1`,
    `etcds://user:${SECRET}?@127.0.0.1`,
    `zookeeper://user:${SECRET}@127.0.0.1:2181/dir?bogus=1`,
    `zookeeper://user:${SECRET}@127.0.0.1:2181/../up`,
    `mysql://user:${SECRET}@127.0.0.1/db`,
  ];
  for (const url of urls) {
    await assert.rejects(connect(url, { maintenance: false }), (error: unknown) => {
      assert.ok(error instanceof StoreUrlError, `${url}: ${String(error)}`);
      assert.ok(!error.message.includes(SECRET), `${url} leaks its password: ${error.message}`);
      return true;
    });
  }
});

void test('redactUrl hides the password only, and leaves URLs without one alone', () => {
  assert.equal(redactUrl('redis://u:p@h:1/0?prefix=a'), 'redis://u:***@h:1/0?prefix=a');
  assert.equal(redactUrl('redis://:p@h'), 'redis://:***@h');
  assert.equal(redactUrl('postgres://u:p/a?b@c@h/db'), 'postgres://u:***@h/db');
  assert.equal(redactUrl('etcd://h1:2379,h2:2379/prefix'), 'etcd://h1:2379,h2:2379/prefix');
  assert.equal(redactUrl('zookeeper://user@h:2181/dir'), 'zookeeper://user@h:2181/dir');
  assert.equal(redactUrl('sqlite:./kvmq.db'), 'sqlite:./kvmq.db');
});
