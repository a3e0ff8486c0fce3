#!/usr/bin/env node
/** The `strata` command (sdk/bin/strata.mjs runs the built file): cli-run.ts on this process's streams. */
import { runCli } from './cli-run.js';

// runCli answers every failure with an exit code; a rejection would be a bug, and Node reports it and exits 1.
void runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
}).then((code) => {
  process.exitCode = code;
});
