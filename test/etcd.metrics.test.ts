/** client.metrics() on etcd: a fresh key prefix per test. */
import { randomBytes } from 'node:crypto';
import { etcdTestUrl } from './fixtures/etcd-support.js';
import { metricsSuite } from './metrics/suite.js';

const base = etcdTestUrl();

metricsSuite({
  name: 'etcd',
  url() {
    return Promise.resolve(`${base}/t-${randomBytes(6).toString('hex')}`);
  },
});
