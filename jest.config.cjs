// Native ESM Jest (middy 7 is ESM-only). Run through scripts/run-node.sh, which sets
// NODE_OPTIONS=--experimental-vm-modules and puts Node >= 22 on PATH.
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': [
      'ts-jest',
      {
        useESM: true,
        diagnostics: false,
        tsconfig: {
          module: 'esnext',
          moduleResolution: 'bundler',
          isolatedModules: true,
          target: 'es2022',
          esModuleInterop: true,
        },
      },
    ],
  },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  // A hang bound, never a speed check: on a loaded 2-core CI machine (two workers beside real cache nodes, redis and
  // LocalStack) a hook that spawns processes and synthesizes state machines has taken over 60 s.
  testTimeout: 300000,
  maxWorkers: 2,
  // A worker keeps every test file's module graph (native ESM runs each file in a VM context, which Node does not free):
  // a fresh-clone run had both workers past 6 GB after ~80 files, collecting slowly enough to make timing-sensitive
  // suites fail. A worker past this much when a file ends is replaced by a fresh one.
  workerIdleMemoryLimit: '1536MB',
};
