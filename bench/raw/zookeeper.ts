/**
 * ZooKeeper's own write rate on the same server, through the same client
 * (node-zookeeper-client behind kvmq's promise layer): one small persistent
 * create per transaction with 64 in flight (the physical limit kvmq's
 * lifecycle is compared with), and creates `batchSize` per multi.
 */
import { ZkSession, type ZkOp } from '../../src/stores/zookeeper/client.js';
import { parseZookeeperUrl } from '../../src/stores/zookeeper/url.js';
import { removeTree } from '../../src/stores/zookeeper/tree.js';
import { inFlight, type BenchSizes } from '../common.js';
import { RAW_PAYLOAD, timeWrites, type RawFigures } from './index.js';

const IN_FLIGHT = 64;

export async function measureRaw(url: string, sizes: BenchSizes): Promise<RawFigures> {
  const options = parseZookeeperUrl(url);
  const zk = await ZkSession.open({ ...options, requestTimeoutMs: 60_000 });
  const dir = `/_raw-bench-${process.pid}`;
  await zk.create(dir);
  let next = 0;
  const path = (): string => `${dir}/raw-${String(next++).padStart(12, '0')}`;
  const single = (n: number): Promise<void> => inFlight(n, IN_FLIGHT, () => zk.create(path(), RAW_PAYLOAD));
  const batched = async (n: number): Promise<void> => {
    for (let done = 0; done < n; done += sizes.batchSize) {
      const ops: ZkOp[] = [];
      for (let i = 0; i < Math.min(sizes.batchSize, n - done); i++)
        ops.push({ op: 'create', path: path(), data: RAW_PAYLOAD });
      await zk.multi(ops);
    }
  };
  try {
    return {
      ...(await timeWrites(sizes, single, batched)),
      setup: `node-zookeeper-client's create, one per transaction, ${IN_FLIGHT} in flight; creates ${sizes.batchSize} per multi, encoded by kvmq`,
    };
  } finally {
    await removeTree(zk, dir);
    zk.close();
  }
}
