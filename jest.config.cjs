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
  // A worker that holds more than this after a test file is replaced by a fresh one. Native ESM under jest keeps
  // every test file's module graph alive: two workers grew to 5.5 GB each in a full run, beside LocalStack, the
  // cache nodes and Chromium, on a 24 GB machine without swap. One CI run slowed a 4 s hook past 60 s; memory
  // pressure is one cause this rules out. No cost in time (the unit suite: 30 s either way).
  workerIdleMemoryLimit: '2GB',
};
