// The layering rule (`strata/layers`): imports point down the layers below and never up, so the code reads one way
// and a change low in the stack cannot depend on one above it. docs/ARCHITECTURE.md explains each layer.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The layers of `core/`, lowest first: a file may import from its own layer and the ones before it. Where a
 * layer has parts, they are ordered the same way (the cost model before the publisher that runs it). Matched by
 * the longest prefix of the repository-relative path.
 */
export const CORE_LAYERS = [
  // Shared definitions: errors, the entry model and key rules, schemas, tenancy, small utilities.
  ['core/errors.ts', 0],
  ['core/util/', 0],
  ['core/model/', 0],
  // Building blocks: the ring document and its store, eviction, metric definitions and sinks.
  ['core/ring/', 1],
  ['core/eviction/', 1],
  ['core/metrics/', 1],
  // Talking to and running cache nodes (client, wire format, fleets, live migration).
  ['core/nodes/', 2],
  // The tier contract and its implementations (memory, Redis, cache-node fleet, S3, local folder).
  ['core/tiers/', 3],
  // Value transforms (Tiera's compress and encrypt): the codec and the keyrings that hold master keys.
  ['core/transforms/', 3.2],
  // Policies (Tiera): the policy document, its presets, its store, and what it compiles to for the coordinator.
  ['core/policy/', 3.5],
  // The coordinator: placement, the tier walk, writes, write-back.
  ['core/coordinator/', 4],
  // The cost model (pure), and the publisher that prices live usage with it.
  ['core/cost/model/', 5],
  ['core/cost/publisher/', 5.1],
  ['core/cost/', 5.1],
  // Workflows: progress documents and the admin service, the steps, the scale trigger, the local runner.
  ['core/workflows/', 6],
  ['core/workflows/steps/', 6.1],
  ['core/workflows/trigger/', 6.1],
  ['core/workflows/local/', 6.2],
  // The HTTP API: routes, operations, validation, middleware, OpenAPI.
  ['core/api/', 7],
  // The composition root: reads the environment, builds clients, wires handlers. Only entry points import it.
  ['core/composition/', 8],
];

/**
 * What each part of the repository outside `core/` may import from it: entry points (Lambdas, scripts, CDK,
 * benchmarks, tests) anything; the cache node only what a node needs (up to `core/nodes`, the wire format); the
 * dashboards only metric definitions. `sdk/` is a published package and imports nothing outside itself; `core/`
 * takes only the SDK's plain-data contract from it.
 */
const OUTSIDE_CEILING = [
  ['cachenode/', 2],
  ['dashboards/', 1],
];
const ENTRY_POINTS = ['lambdas/', 'scripts/', 'cdk/', 'bench/', 'test/', 'examples/', 'eslint/'];
const SDK_CONTRACT = 'sdk/src/contract.ts';

function rankOf(rel, table) {
  let best;
  for (const [prefix, rank] of table) {
    if ((rel === prefix || rel.startsWith(prefix)) && (!best || prefix.length > best[0].length)) best = [prefix, rank];
  }
  return best?.[1];
}

function layerName(rel) {
  let best = '';
  for (const [prefix] of CORE_LAYERS) if (rel.startsWith(prefix) && prefix.length > best.length) best = prefix;
  return best.replace(/\/$/, '') || rel;
}

/** Why importing `to` from `from` (repository-relative paths) breaks the layering, or undefined when it does not. */
export function layeringViolation(from, to) {
  if (!to.startsWith('core/') && !to.startsWith('sdk/') && !to.startsWith('cachenode/') && !to.startsWith('lambdas/')) {
    return undefined;
  }
  if (from.startsWith('sdk/')) {
    return to.startsWith('sdk/') ? undefined : `the SDK is a published package: ${from} may not import ${to}`;
  }
  if (from.startsWith('core/')) {
    if (to.startsWith('sdk/'))
      return to === SDK_CONTRACT ? undefined : `core/ takes only ${SDK_CONTRACT} from the SDK, not ${to}`;
    if (!to.startsWith('core/')) return `core/ does not import entry points or other packages: ${to}`;
    const a = rankOf(from, CORE_LAYERS);
    const b = rankOf(to, CORE_LAYERS);
    if (a === undefined || b === undefined) return `${a === undefined ? from : to} is in no layer: add it to CORE_LAYERS`;
    if (b > a) return `${layerName(from)} is below ${layerName(to)}: it may not import ${to} (move the shared part down)`;
    return undefined;
  }
  if (to.startsWith('core/')) {
    const ceiling = rankOf(from, OUTSIDE_CEILING);
    if (ceiling === undefined) return undefined;
    const b = rankOf(to, CORE_LAYERS);
    if (b === undefined || b > ceiling) return `${from.split('/')[0]}/ may import core/ only up to rank ${ceiling}, not ${to}`;
    return undefined;
  }
  if (to.startsWith('lambdas/') && !ENTRY_POINTS.some((p) => from.startsWith(p))) {
    return `${to} is an entry point: ${from} may not import it`;
  }
  return undefined;
}

/** @type {import('eslint').Rule.RuleModule} */
const rule = {
  meta: {
    type: 'problem',
    docs: { description: 'imports point down the layers (docs/ARCHITECTURE.md)' },
    schema: [],
    messages: { up: '{{why}}' },
  },
  create(context) {
    const file = path
      .relative(ROOT, context.physicalFilename ?? context.filename)
      .split(path.sep)
      .join('/');
    function check(node, source) {
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      let target = path
        .relative(ROOT, path.resolve(path.dirname(path.join(ROOT, file)), source))
        .split(path.sep)
        .join('/');
      target = target.replace(/\.js$/, '.ts').replace(/\.mjs$/, '.mts');
      const why = layeringViolation(file, target);
      if (why) context.report({ node, messageId: 'up', data: { why } });
    }
    return {
      ImportDeclaration: (n) => check(n.source, n.source.value),
      ExportNamedDeclaration: (n) => n.source && check(n.source, n.source.value),
      ExportAllDeclaration: (n) => check(n.source, n.source.value),
      ImportExpression: (n) => n.source.type === 'Literal' && check(n.source, n.source.value),
    };
  },
};

export default { rules: { layers: rule } };
