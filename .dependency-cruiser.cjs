/**
 * kvmq's layers, lowest first: a module may import its own layer and those below, never one above
 * (docs/development.md, "Layers"). `npm run check:layers` runs this in CI.
 */
const LAYERS = [
  ['model', '^src/model/'],
  ['store contract', '^src/stores/contract/'],
  // stores/url.ts opens a store by its URL: it imports every store.
  ['stores', '^src/stores/(?!contract/)'],
  ['metrics, tracing, events', '^src/(metrics|tracing|events)/'],
  ['client and worker', '^src/(client|worker|schedule)/'],
  ['apps', '^src/(serve/|dashboard/|cli/|demo\\.ts$|index\\.ts$)'],
];

module.exports = {
  forbidden: [
    ...LAYERS.slice(0, -1).map(([name, path], i) => ({
      name: `${name.replace(/[ ,]+/g, '-')}-imports-upward`,
      comment: `the ${name} layer imports a layer above it`,
      severity: 'error',
      from: { path },
      to: { path: LAYERS.slice(i + 1).map(([, above]) => above) },
    })),
    {
      name: 'outside-the-layers',
      comment: 'every module of src/ belongs to a layer (add a new folder to LAYERS)',
      severity: 'error',
      from: { path: '^src/', pathNot: LAYERS.map(([, path]) => path) },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)node_modules/|\\.generated\\.ts$|^src/serve/proto/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
