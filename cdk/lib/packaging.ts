/**
 * How the API Lambdas are packaged. One definition feeds the CDK functions (NodejsFunction bundling), the
 * bundle-size test and `npm run bench -- cold-start`, so what is measured is what is deployed.
 *
 * The numbers behind the choice are in README.md ("Lambda packaging"); in short: the `nodejs24.x` runtime
 * ships the AWS SDK v3, so leaving `@aws-sdk/*` out of the bundle halves it (~1.3 MB -> ~0.7 MB) and loads
 * faster than parsing a bundled SDK, while a shared-core layer saves nothing at cold start (the same code is
 * loaded, from /opt instead of /var/task) and adds a second artifact to version.
 */
import { join } from 'node:path';

/** Repository root (this file is cdk/lib/packaging.ts). */
export const REPO_ROOT = join(import.meta.dirname, '..', '..');

/**
 * esbuild turns `require()` calls of bundled CommonJS dependencies (ioredis) into a shim that throws in an ES
 * module unless a real `require` is in scope.
 */
export const ESM_REQUIRE_BANNER = "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);";

export interface LambdaPackaging {
  /** Short name used in reports. */
  readonly name: string;
  readonly description: string;
  /** Modules left out of the bundle (resolved at run time from the runtime or a layer). */
  readonly externalModules: readonly string[];
}

/** Everything in one minified file (the earlier packaging of scripts/build-lambdas.mjs): the baseline. */
export const ALL_BUNDLED: LambdaPackaging = {
  name: 'all-bundled',
  description: 'core, ioredis, middy, zod and the AWS SDK in one minified ESM file',
  externalModules: [],
};

/** The deployed packaging: the runtime's AWS SDK v3, everything else bundled per function. */
export const SDK_EXTERNAL: LambdaPackaging = {
  name: 'sdk-external',
  description: 'as all-bundled, but @aws-sdk/* comes from the nodejs24.x runtime',
  externalModules: ['@aws-sdk/*'],
};

export const CHOSEN_PACKAGING = SDK_EXTERNAL;

/** Budget of one minified Lambda bundle (the entry file, without its source map). */
export const BUNDLE_BUDGET_BYTES = 1_000_000;

/** esbuild options shared by the CDK functions and the benchmarks (NodejsFunction maps its props onto these). */
export const COMMON_ESBUILD = {
  platform: 'node',
  target: 'node24',
  format: 'esm',
  minify: true,
  /** Minified, but classes keep their names: errors are named after their class (core/errors.ts), and Step Functions matches those names. */
  keepNames: true,
  sourcemap: true,
  sourcesContent: false,
  banner: ESM_REQUIRE_BANNER,
} as const;

/** One entry file per API function group (see core/api/routes.ts). */
export function apiLambdaEntry(fn: string): string {
  return join(REPO_ROOT, 'lambdas', 'api', `${fn}.ts`);
}
