/** The CLI says a check's TypeError in one line, and shows the stack of a bug's, wherever it was thrown. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isValidationError } from '../src/cli/errors.js';
import { connect } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'kvmq-bug-errors-'));
after(() => rmSync(dir, { recursive: true, force: true }));

void describe('isValidationError', () => {
  it('takes the client checks of a bad argument', async () => {
    const client = await connect(`sqlite:${join(dir, 'checks.db')}`);
    try {
      await assert.rejects(client.enqueue('jobs', 1, { priority: -1 }), (error: unknown) => isValidationError(error));
      await assert.rejects(client.enqueue('bad queue', 1), (error: unknown) => isValidationError(error));
    } finally {
      await client.close();
    }
  });

  it('leaves the engine errors of a bug, even thrown from a client frame', () => {
    const atClient = (message: string): TypeError => {
      const error = new TypeError(message);
      error.stack = `TypeError: ${message}\n    at Client.enqueue (/app/node_modules/kvmq/dist/client/client.js:10:5)`;
      return error;
    };
    assert.equal(isValidationError(atClient('priority must be a whole number from 0')), true);
    for (const message of [
      "Cannot read properties of undefined (reading 'id')",
      "Cannot set properties of null (setting 'x')",
      'store.flow is not a function',
      'messages is not iterable',
      "Cannot destructure property 'queue' of 'undefined' as it is undefined.",
      'Converting circular structure to JSON',
      'Do not know how to serialize a BigInt',
    ]) {
      assert.equal(isValidationError(atClient(message)), false, message);
    }
    assert.equal(isValidationError(new RangeError('x')), false);
  });
});
