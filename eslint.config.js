import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'src/serve/proto/generated/',
      'src/dashboard/assets.generated.ts',
      'dist/',
      'node_modules/',
      'coverage/',
      '.scratch/',
      'kvmq-data/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      '@typescript-eslint/no-confusing-void-expression': 'off',
      '@typescript-eslint/no-invalid-void-type': 'off',
      '@typescript-eslint/no-unnecessary-condition': ['error', { allowConstantLoopConditions: true }],
      // node:test's describe/test return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'test', 'it', 'suite', 'before', 'after'] },
          ],
        },
      ],
    },
  },
  {
    // Small files with one purpose, and functions a reader takes in at once (docs/development.md, Checks).
    files: ['src/**/*.ts'],
    ignores: ['**/*.generated.ts'],
    rules: {
      'max-lines': ['error', { max: 600 }],
      'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: Object.fromEntries(
        [
          'process',
          'console',
          'setTimeout',
          'clearTimeout',
          'setInterval',
          'clearInterval',
          'setImmediate',
          'Buffer',
          'URL',
          'module',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
);
