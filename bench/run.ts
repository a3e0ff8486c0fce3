/**
 * `npm run bench -- <scenario> [--seconds N] [--runs N]`: runs a benchmark, prints its figures and ratios against the
 * baseline measured in the same run, and writes bench/results/<scenario>.json. Scenarios may read flags of their
 * own (`--name value`).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { coldStart } from './cold-start.js';
import { elasticity } from './elasticity.js';
import { hotFault } from './hot-fault.js';
import { hotPath } from './hot-path.js';
import { invalidate } from './invalidate.js';
import { invalidateL1 } from './invalidate-l1.js';
import { nodeFailure } from './node-failure.js';
import { policyOverhead } from './policy-overhead.js';
import { scaleOut } from './scale-out.js';
import { storeOnce } from './store-once.js';
import { stream } from './stream.js';
import { throttledCopy } from './throttled-copy.js';
import { transforms } from './transforms.js';
import { warmNode } from './warm-node.js';
import { writeBackInterval } from './write-back-interval.js';

const SCENARIOS: Record<string, (opts: { seconds: number; runs?: number }) => Promise<Record<string, unknown>>> = {
  'hot-path': hotPath,
  'policy-overhead': policyOverhead,
  'hot-fault': hotFault,
  'warm-node': warmNode,
  'scale-out': scaleOut,
  'node-failure': nodeFailure,
  'cold-start': coldStart,
  elasticity,
  'throttled-copy': throttledCopy,
  'store-once': storeOnce,
  stream,
  'write-back-interval': writeBackInterval,
  transforms,
  invalidate,
  'invalidate-l1': invalidateL1,
};

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const secondsArg = args.indexOf('--seconds');
  const seconds = secondsArg >= 0 ? Number(args[secondsArg + 1]) : 10;
  const runsArg = args.indexOf('--runs');
  const runs = runsArg >= 0 ? Number(args[runsArg + 1]) : undefined;
  // Every `--flag value` pair is a setting (a scenario may read its own, e.g. elasticity's --launch-delay-ms).
  const names = args.filter((a, i) => !a.startsWith('--') && !(args[i - 1]?.startsWith('--') && !args[i - 1]!.includes('=')));
  const chosen = names.length ? names : Object.keys(SCENARIOS);
  for (const name of chosen) {
    const run = SCENARIOS[name];
    if (!run) {
      console.error(`unknown scenario '${name}'; choose from: ${Object.keys(SCENARIOS).join(', ')}`);
      process.exit(2);
    }
    console.log(`\n=== ${name} (${seconds} s per measurement) ===`);
    const result = await run({ seconds, runs });
    if (result.partial) {
      console.log('\na partial run (some modes or cases left out): results not written');
      continue;
    }
    const dir = join(import.meta.dirname, 'results');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${name}.json`);
    writeFileSync(
      file,
      JSON.stringify({ ...result, measuredAt: new Date().toISOString(), node: process.version }, null, 2) + '\n',
    );
    console.log(`\nwritten ${file}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
