/** The conformance suite on ZooKeeper: a fresh chroot per test on the server `npm test` started. */
import { after } from 'node:test';
import { conformance } from './conformance/index.js';
import { freshStoreUrl, hostsOf, PlainClient, serverUrl } from './fixtures/zookeeper-env.js';

const server = serverUrl();
let plain: Promise<PlainClient> | null = null;

after(async () => {
  if (plain !== null) (await plain).close();
});

conformance({
  name: 'zookeeper',
  overNetwork: true,
  shortSession: { option: 'sessionTimeoutMs=4000', ms: 4000 },
  // A flow past one multi is staged; its last multi holds about 1,150 messages with generated ids (docs/zookeeper.md).
  flowNodes: 1000,
  async url() {
    plain ??= PlainClient.connect(hostsOf(server));
    return freshStoreUrl(server, await plain);
  },
  capabilities: {
    maxPayloadBytes: 1_000_000 - 64 * 1024,
    wakeups: true,
    instantRelease: true,
    deadLetterQueue: true,
    overlapClaims: false,
    flows: true,
  },
});
