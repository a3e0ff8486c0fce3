// Verifies the built package: ESM and CJS entry points both expose the API, the declarations exist, the CLI
// starts, and the package resolves by name through its "exports" map. Run after `npm run -w sdk build`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const require = createRequire(import.meta.url);

const exported = [
  'StrataClient',
  'StrataError',
  'ValidationError',
  'NotFoundError',
  'VersionConflictError',
  'TimeoutError',
  'NetworkError',
  'UnavailableError',
  'RateLimitedError',
  'WorkflowsUnavailableError',
  'ExecutionExistsError',
  'WorkflowsClient',
  'CostClient',
  'renderProgressBar',
  'formatBytes',
];

function check(label, mod) {
  for (const name of exported) assert.equal(typeof mod[name], 'function', `${label}: ${name} is not exported`);
  const client = new mod.StrataClient({ endpoint: 'http://127.0.0.1:1', namespace: 'check' });
  assert.equal(client.namespace, 'check');
  assert.equal(typeof client.workflows.start, 'function', `${label}: client.workflows is missing`);
  assert.equal(typeof client.cost.placements, 'function', `${label}: client.cost is missing`);
  assert.match(mod.renderProgressBar({ status: 'RUNNING' }, { width: 4 }), /^\[----\] starting$/);
  assert.ok(new mod.VersionConflictError({ code: 'VERSION_CONFLICT', status: 409, message: 'x' }) instanceof mod.StrataError);
  assert.equal(mod.SDK_VERSION, pkg.version, `${label}: SDK_VERSION (src/version.ts) differs from package.json`);
  console.log(`ok  ${label}`);
}

// The tarball carries the license package.json names, the same text as the repository's.
assert.equal(pkg.license, 'Apache-2.0');
assert.equal(
  readFileSync(join(root, 'LICENSE'), 'utf8'),
  readFileSync(join(root, '..', 'LICENSE'), 'utf8'),
  'sdk/LICENSE differs from LICENSE',
);

for (const file of [pkg.exports['.'].import, pkg.exports['.'].require, pkg.exports['.'].types, pkg.bin.strata]) {
  assert.ok(existsSync(join(root, file)), `missing ${file}`);
}

check('CJS  require(dist/cjs/index.cjs)', require(join(root, pkg.exports['.'].require)));
check('ESM  import(dist/esm/index.js)', await import(pathToFileURL(join(root, pkg.exports['.'].import)).href));
// By package name, through the exports map (the npm workspace links node_modules/@strata-cache/sdk).
check('ESM  import("@strata-cache/sdk")', await import(pkg.name));
check('CJS  require("@strata-cache/sdk")', require(pkg.name));

const dts = readFileSync(join(root, pkg.exports['.'].types), 'utf8');
assert.match(dts, /StrataClient/, 'index.d.ts does not mention StrataClient');
console.log('ok  types dist/types/index.d.ts');

const help = execFileSync(process.execPath, [join(root, pkg.bin.strata), '--help'], { encoding: 'utf8' });
assert.match(help, /usage: strata/);
assert.match(help, /workflow start <workflow>/);
assert.match(help, /cost \[options\]/);
console.log('ok  cli dist/esm/cli.js --help');
const version = execFileSync(process.execPath, [join(root, pkg.bin.strata), '--version'], { encoding: 'utf8' });
assert.equal(version, `${pkg.version}\n`);
console.log('ok  cli dist/esm/cli.js --version');
const getHelp = execFileSync(process.execPath, [join(root, pkg.bin.strata), 'help', 'get'], { encoding: 'utf8' });
assert.match(getHelp, /usage: strata get <key> \[-v\|--verbose\]/);
console.log('ok  cli dist/esm/cli.js help get');
const costHelp = execFileSync(process.execPath, [join(root, pkg.bin.strata), 'cost', '--help'], { encoding: 'utf8' });
assert.match(costHelp, /usage: strata cost/);
assert.match(costHelp, /--paper-2010/);
console.log('ok  cli dist/esm/cli.js cost --help');
