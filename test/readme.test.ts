/**
 * The README's first example runs as written, on the embedded store: the
 * block is taken from README.md itself, with `kvmq` pointed at this checkout.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvmq-readme-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function firstExample(index = pathToFileURL(join(ROOT, 'src/index.ts')).href): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('```ts\n', readme.indexOf('This runs as written'));
  assert.ok(start >= 0, 'the README has its runnable example');
  const body = readme.slice(start + '```ts\n'.length, readme.indexOf('```\n', start + 1));
  return body.replace("from 'kvmq'", `from '${index}'`);
}

test('the README example typechecks strictly: the payload and result types need no cast', () => {
  const file = join(dir, 'typed.mts');
  writeFileSync(file, firstExample(join(ROOT, 'src/index.js')));
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    typeRoots: [join(ROOT, 'node_modules/@types')],
    types: ['node'],
  });
  const problems = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  assert.deepEqual(problems, []);
  assert.doesNotMatch(firstExample(), / as \{/, 'no cast of the payload');
});

test('the README example runs as written: a failure is listed, shown and retried', () => {
  const file = join(dir, 'example.mts');
  writeFileSync(file, firstExample());
  const env = { ...process.env, KVMQ_STORE: `sqlite:${join(dir, 'kvmq.db')}` };
  const run = (): ReturnType<typeof spawnSync> =>
    spawnSync(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });

  const first = run();
  assert.equal(first.status, 0, String(first.stderr));
  const out = String(first.stdout);
  assert.match(out, /^welcome-ada sent in \d+ ms$/m);
  assert.match(String(first.stderr), /failed for good at attempt 3 \(thrown\): Error: cannot send to 'not an address'/);
  assert.match(out, /^welcome-ada is done-awaiting-gc, mail id mail-\d+$/m);
  for (const attempt of [1, 2, 3]) {
    assert.match(out, new RegExp(`attempt ${attempt}: (retry|error), Error: cannot send to 'not an address'`));
  }
  assert.match(out, /\{\s+ok: true,\s+id: '[^']+',\s+state: 'queued'\s+\}/);
  assert.match(out, /failed: 0/);

  // Run twice: welcome-ada is revived and sent again; the retried message runs and fails again.
  const second = run();
  assert.equal(second.status, 0, String(second.stderr));
  assert.match(String(second.stdout), /^welcome-ada sent in \d+ ms$/m);
});
