/**
 * The Lua scripts are built into src/stores/redis/scripts.generated.ts; this fails
 * when that module is out of date with src/stores/redis/lua/*.lua, and checks each
 * script's declared interface.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KEY_NAMES, KEY_TYPES } from '../src/stores/redis/keys.js';
import { LIBRARY, SCRIPTS } from '../src/stores/redis/scripts.generated.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

void test('src/stores/redis/scripts.generated.ts is what npm run redis-scripts makes of the .lua files', () => {
  const run = spawnSync(process.execPath, ['scripts/redis-scripts.mjs', '--check'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(run.status, 0, `${run.stderr}${run.stdout}`);
});

void test("the scripts check each key's type as keys.ts's KEY_TYPES gives it (channels hold no data)", () => {
  const table = /KEY_TYPES = \{ ([^}]*) \}/.exec(LIBRARY.source)?.[1];
  assert.ok(table !== undefined, 'the library holds no KEY_TYPES table');
  const inLua = Object.fromEntries(
    table.split(', ').map((entry): [string, string] => {
      const [name = '', type = ''] = entry.split(" = '");
      return [name, type.replace(/'$/, '')];
    }),
  );
  const fromKeys = Object.entries(KEY_TYPES)
    .filter(([, type]) => type !== 'channel')
    .map(([key, type]) => [key.replace(/\?$/, '').replace(/[^A-Za-z0-9]/g, '_'), type]);
  assert.deepEqual(inLua, Object.fromEntries(fromKeys));
  for (const script of Object.values(SCRIPTS)) {
    if (script.source.includes('key_type(')) assert.ok(script.source.includes(`{ ${table} }`), script.name);
  }
});

void test('every script names known keys, carries its SHA1 and opens with a Redis 7 shebang', () => {
  const scripts = Object.values(SCRIPTS);
  assert.ok(scripts.length >= 10);
  for (const script of scripts) {
    for (const key of script.keys) assert.ok(KEY_NAMES.includes(key), `${script.name}: unknown key ${key}`);
    assert.equal(createHash('sha1').update(script.source).digest('hex'), script.sha, script.name);
    assert.match(script.source, /^#!lua( flags=(no-writes|allow-oom))?\n/, script.name);
    assert.equal(script.readOnly, script.source.startsWith('#!lua flags=no-writes'), script.name);
  }
  // One library holds them all, named by its content: FCALL names each script's function in it.
  assert.match(LIBRARY.name, /^kvmq_[0-9a-f]{12}$/);
  assert.ok(LIBRARY.source.startsWith(`#!lua name=${LIBRARY.name}\n`));
  for (const script of scripts) {
    assert.equal(script.fn, `${LIBRARY.name}_${script.name.replace(/-/g, '_')}`);
    assert.ok(LIBRARY.source.includes(`function_name = '${script.fn}'`), script.name);
  }
  // Scripts that add data must be refused whole when Redis is out of memory.
  for (const name of ['enqueue', 'configure'] as const) {
    assert.ok(SCRIPTS[name].source.startsWith('#!lua\n'), `${name} must not run out of memory`);
  }
});
