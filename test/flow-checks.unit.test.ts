/** A mistake in a flow's tree names the node it is in, however deep, before anything is written. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { connect, type FlowTree } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'kvmq-flow-checks-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const leaf = (extra: object = {}): FlowTree => ({ queue: 'jobs', payload: 1, ...extra });

void describe('flow checks', () => {
  it('name the node of each mistake, from its shape to its message options', async () => {
    const client = await connect(`sqlite:${join(dir, 'flows.db')}`);
    try {
      const cases: [FlowTree, RegExp][] = [
        [leaf({ children: [leaf(), leaf({ prio: 1 })] }), /^flow node children\[1\]: unknown option 'prio'/],
        [
          leaf({ children: [leaf({ children: [leaf({ priority: -1 })] })] }),
          /^flow node children\[0\]\.children\[0\]: priority must be/,
        ],
        [leaf({ children: [leaf({ queue: 'bad queue' })] }), /^flow node children\[0\]: queue name "bad queue"/],
        [leaf({ children: [leaf({ onChildFailure: 'never' })] }), /^flow node children\[0\]: onChildFailure must be/],
        [leaf({ dependsOn: [{ queue: 'jobs' }] }), /^flow node the root: message id undefined is invalid/],
        [leaf({ children: 3 }), /^flow node the root: children must be an array of flow nodes$/],
        [leaf({ children: [leaf(), 7] }), /^flow node children\[1\]: a flow node must be a plain object, got number$/],
        [leaf({ children: [leaf({ runAt: 'soon' })] }), /^flow node children\[0\]: runAt must be/],
      ];
      for (const [tree, message] of cases) {
        await assert.rejects(client.flow(tree), (error: unknown) => {
          assert.ok(error instanceof TypeError || error instanceof RangeError, String(error));
          assert.match(error.message, message);
          return true;
        });
      }
      assert.equal((await client.queueStatus('jobs')).total, 0);
    } finally {
      await client.close();
    }
  });
});
