/** `kvmq work`'s one-line errors: short ones whole, long ones cut to their first line and the end. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ERROR_LINE_CHARS, errorLine } from '../src/cli/outcome-tally.js';

void describe('errorLine', () => {
  it('joins the lines of a short error, first line first', () => {
    assert.equal(
      errorLine('command exited with code 1\nfirst\n\n  second  \n'),
      'command exited with code 1: first | second',
    );
    assert.equal(errorLine('timed out after 300 ms'), 'timed out after 300 ms');
    assert.equal(errorLine(null), 'no error text');
  });

  it('keeps the first line and the end of a long error, within the limit', () => {
    const lines = Array.from({ length: 100 }, (_, i) => `line ${i}`);
    const line = errorLine(`command exited with code 2\n${lines.join('\n')}`);
    assert.equal(line.length, ERROR_LINE_CHARS);
    assert.ok(line.startsWith('command exited with code 2: …'), line);
    assert.ok(line.endsWith('line 98 | line 99'), line);
  });

  it('cuts a first line that alone is too long', () => {
    const line = errorLine('x'.repeat(500));
    assert.equal(line.length, ERROR_LINE_CHARS);
    assert.ok(line.endsWith('x…'));
  });
});
