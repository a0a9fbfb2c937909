/**
 * The conformance suite: the same behaviour, checked on every store. A store's
 * test file calls `conformance(fixture)` with a fixture that hands out fresh
 * namespaces.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { backoff } from './backoff.js';
import { badInput } from './bad-input.js';
import { batch } from './batch.js';
import { cancel } from './cancel.js';
import { claims } from './claims.js';
import { consumers } from './consumers.js';
import { crash } from './crash.js';
import { debounce } from './debounce.js';
import { enqueue } from './enqueue.js';
import { events } from './events.js';
import { expiry } from './expiry.js';
import { failures } from './failures.js';
import { fencing } from './fencing.js';
import { filters } from './filters.js';
import { gc } from './gc.js';
import { groups } from './groups.js';
import { groupRateLimit } from './group-rate-limit.js';
import { flows } from './flows.js';
import { dependsOn } from './depends-on.js';
import { lifecycle } from './lifecycle.js';
import { lifo } from './lifo.js';
import { list } from './list.js';
import { locks } from './locks.js';
import { monitor } from './monitor.js';
import { priority } from './priority.js';
import { queueEvents } from './queue-events.js';
import { rateLimit } from './rate-limit.js';
import { reports } from './reports.js';
import { requeue } from './requeue.js';
import { results } from './results.js';
import { runAt } from './run-at.js';
import { schedules } from './schedules.js';
import { status } from './status.js';
import { timeout } from './timeout.js';
import { update } from './update.js';
import { worker } from './worker.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

export type { StoreFixture } from '../support/fixture.js';

export function conformance(fixture: StoreFixture): void {
  void describe(`conformance: ${fixture.name}`, () => {
    storeTest(fixture, 'the store declares the capabilities the fixture expects', (h) => {
      const declared = storeOf(h.client).capabilities;
      for (const [name, expected] of Object.entries(fixture.capabilities ?? {})) {
        assert.equal(declared[name as keyof typeof declared], expected, name);
      }
    });
    enqueue(fixture);
    lifecycle(fixture);
    status(fixture);
    requeue(fixture);
    results(fixture);
    batch(fixture);
    backoff(fixture);
    locks(fixture);
    fencing(fixture);
    filters(fixture);
    gc(fixture);
    consumers(fixture);
    worker(fixture);
    claims(fixture);
    events(fixture);
    queueEvents(fixture);
    monitor(fixture);
    timeout(fixture);
    failures(fixture);
    expiry(fixture);
    list(fixture);
    badInput(fixture);
    crash(fixture);
    priority(fixture);
    lifo(fixture);
    runAt(fixture);
    update(fixture);
    groups(fixture);
    debounce(fixture);
    rateLimit(fixture);
    groupRateLimit(fixture);
    flows(fixture);
    dependsOn(fixture);
    schedules(fixture);
    reports(fixture);
    cancel(fixture);
  });
}
