/** client.metrics() on ZooKeeper: a fresh chroot per test. */
import { after } from 'node:test';
import { freshStoreUrl, hostsOf, PlainClient, serverUrl } from './fixtures/zookeeper-env.js';
import { metricsSuite } from './metrics/suite.js';

const server = serverUrl();
let plain: Promise<PlainClient> | null = null;

after(async () => {
  if (plain !== null) (await plain).close();
});

metricsSuite({
  name: 'zookeeper',
  async url() {
    plain ??= PlainClient.connect(hostsOf(server));
    return freshStoreUrl(server, await plain);
  },
});
