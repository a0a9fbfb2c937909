/**
 * Plain etcd consumers for the serve bench, in a process of their own: each
 * registers under /queue/{q}/consumer/{uuid} (on a lease, JSON with a
 * capacity), watches its prefix and deletes each delivery (the ack). Prints
 * `ready` once registered and `done MS` when N deliveries were acked.
 *
 *   node --import tsx bench/serve/queue-consumers.ts HOST:PORT QUEUE N CONSUMERS CAPACITY
 */
import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';

const [endpoint = '', queue = '', nText = '0', consumersText = '4', capacityText = '64'] = process.argv.slice(2);
const n = Number(nText);
let acked = 0;
let first = 0;
const clients: Etcd3[] = [];
for (let c = 0; c < Number(consumersText); c++) {
  const client = new Etcd3({ hosts: `http://${endpoint}` });
  clients.push(client);
  const id = randomUUID();
  const lease = client.lease(30);
  await lease
    .put(`/queue/${queue}/consumer/${id}`)
    .value(JSON.stringify({ host: 'bench', capacity: Number(capacityText) }));
  const watcher = await client.watch().prefix(`/queue/${queue}/consumer/${id}/`).create();
  watcher.on('put', (kv) => {
    if (first === 0) first = performance.now();
    void client
      .delete()
      .key(kv.key)
      .exec()
      .then(() => {
        acked++;
        if (acked === n) {
          process.stdout.write(`done ${performance.now() - first}\n`);
          for (const each of clients) each.close();
          process.exit(0);
        }
      });
  });
}
process.stdout.write('ready\n');
