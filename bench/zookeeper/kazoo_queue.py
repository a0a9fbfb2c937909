"""kazoo's LockingQueue (Debian python3-kazoo) under the same load kvmq gets: kvmq's own driver, for the benchmark.

Usage: kazoo_queue.py HOSTS PATH N PRODUCERS CONSUMERS
Puts N small items with PRODUCERS threads (each put returns once ZooKeeper acknowledged it), then takes them
with CONSUMERS threads (get, then consume: the entry is removed only after the item was handled), each thread
with its own session as separate consumers would have. Prints {"putMs": ..., "consumeMs": ...} and removes PATH.
"""
import json
import sys
import threading
import time

from kazoo.client import KazooClient

hosts, path = sys.argv[1], sys.argv[2]
n, producers, consumers = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def session():
    zk = KazooClient(hosts=hosts, timeout=15)
    zk.start(timeout=15)
    return zk


def run_threads(count, target):
    threads = [threading.Thread(target=target, args=(session(),)) for _ in range(count)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return start


lock = threading.Lock()
state = {"put": 0, "consumed": 0, "end": 0.0}


def produce(zk):
    queue = zk.LockingQueue(path)
    while True:
        with lock:
            if state["put"] >= n:
                break
            state["put"] += 1
            i = state["put"]
        queue.put(json.dumps({"i": i}).encode())
    zk.stop()
    zk.close()


def consume(zk):
    queue = zk.LockingQueue(path)
    while True:
        with lock:
            if state["consumed"] >= n:
                break
        item = queue.get(timeout=1)
        if item is None:
            continue
        queue.consume()
        with lock:
            state["consumed"] += 1
            if state["consumed"] == n:
                state["end"] = time.perf_counter()
    zk.stop()
    zk.close()


put_start = run_threads(producers, produce)
put_ms = (time.perf_counter() - put_start) * 1000
consume_start = run_threads(consumers, consume)
consume_ms = (state["end"] - consume_start) * 1000

admin = session()
admin.delete(path, recursive=True)
admin.stop()
admin.close()
print(json.dumps({"putMs": put_ms, "consumeMs": consume_ms}))
