// Curator's DistributedQueue in lock-safe mode (Debian libcurator-recipes-java) under the same load kvmq gets:
// kvmq's own driver, for the benchmark, compiled with javac at bench time against /usr/share/java.
//
// Usage: java CuratorQueue HOSTS PATH N CONSUMERS
// Puts N small items and waits until ZooKeeper acknowledged every one (Curator's puts are background writes:
// flushPuts is what makes them acknowledged), then takes them with a lock-safe consumer running CONSUMERS
// threads, until every item was handled and removed. Prints {"putMs": ..., "consumeMs": ...} and removes PATH.

import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorQueue {
  private static final QueueSerializer<byte[]> BYTES =
      new QueueSerializer<byte[]>() {
        @Override
        public byte[] serialize(byte[] item) {
          return item;
        }

        @Override
        public byte[] deserialize(byte[] bytes) {
          return bytes;
        }
      };

  public static void main(String[] args) throws Exception {
    String hosts = args[0];
    String path = args[1];
    int n = Integer.parseInt(args[2]);
    int consumers = Integer.parseInt(args[3]);
    String queuePath = path + "/queue";
    String lockPath = path + "/locks";
    CuratorFramework client =
        CuratorFrameworkFactory.newClient(hosts, 15_000, 15_000, new ExponentialBackoffRetry(100, 5));
    client.start();
    client.blockUntilConnected();

    DistributedQueue<byte[]> producer =
        QueueBuilder.builder(client, null, BYTES, queuePath).lockPath(lockPath).buildQueue();
    producer.start();
    long putStart = System.nanoTime();
    for (int i = 0; i < n; i++) producer.put(("{\"i\":" + i + "}").getBytes(StandardCharsets.UTF_8));
    if (!producer.flushPuts(120, TimeUnit.SECONDS)) throw new IllegalStateException("puts not acknowledged");
    double putMs = (System.nanoTime() - putStart) / 1e6;
    producer.close();

    AtomicInteger handled = new AtomicInteger();
    QueueConsumer<byte[]> consumer =
        new QueueConsumer<byte[]>() {
          @Override
          public void consumeMessage(byte[] message) {
            handled.incrementAndGet();
          }

          @Override
          public void stateChanged(CuratorFramework c, ConnectionState state) {}
        };
    ExecutorService threads = Executors.newFixedThreadPool(consumers);
    long consumeStart = System.nanoTime();
    DistributedQueue<byte[]> queue =
        QueueBuilder.builder(client, consumer, BYTES, queuePath)
            .lockPath(lockPath)
            .executor(threads)
            .buildQueue();
    queue.start();
    // Handled is not finished: in lock-safe mode the item is removed after its handler returns.
    // Listing the queue is not free: poll it only once every handler has run.
    while (handled.get() < n) Thread.sleep(1);
    while (!client.getChildren().forPath(queuePath).isEmpty()) Thread.sleep(2);
    double consumeMs = (System.nanoTime() - consumeStart) / 1e6;
    queue.close();
    threads.shutdownNow();

    client.delete().deletingChildrenIfNeeded().forPath(path);
    client.close();
    System.out.printf("{\"putMs\": %.3f, \"consumeMs\": %.3f}%n", putMs, consumeMs);
  }
}
