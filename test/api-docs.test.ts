/**
 * docs/api.md cannot fall behind the code: every exported function, public class method and property, option,
 * constant and error of the public API (package.json "exports") has an entry there. The API is read with the
 * TypeScript compiler, so a method or option added without its entry fails here.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { readApiSurface } from './support/api-surface.js';
import { DocEntries } from './support/doc-entries.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const docs = new DocEntries(readFileSync(`${ROOT}docs/api.md`, 'utf8'));
const api = readApiSurface(ROOT);

void test('the API read from the code is the one users import', () => {
  const callables = api.callables.map((callable) => callable.label);
  for (const label of ['connect', 'startServer', 'Client.enqueue', 'Client.retryFailed', 'Worker.stop']) {
    assert.ok(callables.includes(label), `${label} not found among ${callables.join(', ')}`);
  }
  assert.ok(!callables.some((label) => /\.(prepare|cachedConfig|setPaused|drain)$/.test(label)), 'private members');
  const options = api.options.map((option) => option.label);
  for (const label of [
    'WorkerOptions.concurrency',
    'EnqueueOptions.debounce',
    'BatchItem.payload',
    'ServeOptions.listen',
  ]) {
    assert.ok(options.includes(label), `${label} not found among options`);
  }
  assert.ok(
    options.some((label) => label.endsWith('.failedLifetimeMs')),
    'configure() takes QueueConfig fields',
  );
  assert.ok(!options.some((label) => label.endsWith('.aborted')), "AbortSignal's fields are not kvmq's");
});

void test('every exported function and public method has an entry in docs/api.md', () => {
  const missing = api.callables.filter((callable) => docs.entriesOf(callable.name).length === 0);
  assert.deepEqual(
    missing.map((callable) => callable.label),
    [],
    'give each a heading (### name(args) → result) or a line starting with `name(args)`',
  );
});

void test('every option is named as code in the entry of what takes it', () => {
  const missing = api.options.filter(
    (option) =>
      !option.takenBy.some((name) => docs.entriesOf(name).some((section) => section.codeWords.has(option.name))),
  );
  assert.deepEqual(
    missing.map((option) => `${option.label} (in the entry of ${option.takenBy.join(' or ')})`),
    [],
    'name each as code (`name`, a table row) where its function is documented',
  );
});

void test('every exported options type is taken by a documented function, so its fields are checked', () => {
  const taken = new Set(api.options.map((option) => option.label.split('.')[0]));
  assert.deepEqual(
    api.optionTypes.filter((name) => !taken.has(name)),
    [],
  );
});

void test('every public property of an exported class is named in its section', () => {
  const missing = api.classProperties.filter(
    (property) => docs.sectionTitled(property.className)?.codeWords.has(property.name) !== true,
  );
  assert.deepEqual(
    missing.map((property) => property.label),
    [],
    'a class is described under a heading of its name (## Client) or ending in → Name',
  );
});

void test('every exported error, its properties and every exported constant are named as code', () => {
  const named = docs.all().codeWords;
  const missing = [
    ...api.errors.flatMap((error) => [error.name, ...error.properties.map((property) => `${error.name}.${property}`)]),
    ...api.constants,
  ].filter((label) => !named.has(label.split('.').pop() ?? label));
  assert.deepEqual(missing, []);
});

void test('an entry is a heading or a line that starts with the call, not a mention in prose', () => {
  const sample = new DocEntries(
    [
      '## Client',
      '### retry(queue, id) → Promise<ActionResult>',
      'Takes `queue`.',
      '### Schedules',
      '`schedule(queue, name)` creates one; `unschedule(queue, name)` removes it.',
      '- `start()` registers the consumer; `gcLifetimeMs`',
      '## Events',
      'written when `remove` deleted it, or `retryFailed(queue)` moved it',
    ].join('\n'),
  );
  assert.equal(sample.entriesOf('retry').length, 1);
  assert.ok(sample.entriesOf('retry')[0]?.codeWords.has('queue'));
  assert.equal(sample.entriesOf('retryFailed').length, 0);
  assert.equal(sample.entriesOf('remove').length, 0);
  assert.equal(sample.entriesOf('unschedule').length, 0);
  assert.equal(sample.entriesOf('schedule').length, 1);
  assert.ok(sample.entriesOf('start')[0]?.codeWords.has('gcLifetimeMs'));
  assert.ok(!sample.entriesOf('start')[0]?.codeWords.has('remove'), 'a section ends at the next heading');
  assert.ok(sample.sectionTitled('Client')?.codeWords.has('queue'));
});
