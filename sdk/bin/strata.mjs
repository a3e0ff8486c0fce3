#!/usr/bin/env node
// The `strata` command. It is a committed file rather than dist/esm/cli.js itself so that npm links the command
// when it installs the workspace, which happens before the SDK is built on a fresh clone (npm skips a bin whose
// target does not exist, and `npx strata` then fails with "could not determine executable to run").
import { existsSync } from 'node:fs';

const cli = new URL('../dist/esm/cli.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write('strata: the SDK is not built yet. Build it once, from the repository root: npm run -w sdk build\n');
  process.exit(1);
}
await import(cli.href);
