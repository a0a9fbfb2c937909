/**
 * Generated code is made by the build (`npm run generate`), never stored in git. The build's output, what the
 * package ships in dist/, must be what the generators make of today's sources: a dist built before a .lua,
 * .proto or dashboard source changed fails here (each generator's own test checks the copy in src/).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');

function built(path: string): string {
  const file = join(DIST, path);
  assert.ok(existsSync(file), `${file} is missing: run npm run build`);
  return file;
}

void test("dist's Redis scripts are what the generator makes of src/stores/redis/lua/", async () => {
  const generator = (await import(pathToFileURL(join(ROOT, 'scripts/redis-scripts.mjs')).href)) as {
    parts(): { helpers: unknown; scripts: unknown };
  };
  const shipped = (await import(pathToFileURL(built('stores/redis/scripts.generated.js')).href)) as {
    HELPERS?: unknown;
    SCRIPTS: unknown;
  };
  // The parts the store composes its Lua from: every helper and every script, compared whole.
  const { helpers, scripts } = generator.parts();
  const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
  assert.ok(same(shipped.HELPERS, helpers), "dist's helpers are not what src/stores/redis/lua/lib/ makes");
  assert.ok(same(shipped.SCRIPTS, scripts), "dist's scripts are not what src/stores/redis/lua/ makes");
});

void test("dist's dashboard bundle is what the generator makes of src/dashboard/browser/", async () => {
  const generator = (await import(pathToFileURL(join(ROOT, 'scripts/dashboard-assets.mjs')).href)) as {
    generate(): Promise<string>;
  };
  const shipped = (await import(pathToFileURL(built('dashboard/assets.generated.js')).href)) as {
    ASSETS_VERSION: string;
  };
  assert.ok((await generator.generate()).includes(JSON.stringify(shipped.ASSETS_VERSION)), 'dist holds another bundle');
});

void test("dist's etcd codecs are the generated ones in src/serve/proto/generated/", () => {
  for (const name of ['etcd.js', 'etcd.d.ts', 'descriptor.json']) {
    const source = readFileSync(join(ROOT, 'src/serve/proto/generated', name), 'utf8');
    assert.equal(readFileSync(built(join('serve/proto/generated', name)), 'utf8'), source, name);
  }
});
