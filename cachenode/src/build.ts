// The node's build label for /healthz: STRATA_NODE_BUILD when set, else the version of the package it runs from.
import { readFileSync } from 'node:fs';
import { buildLabel } from '../../core/nodes/protocol.js';

let cached: string | undefined;

/** What /healthz reports as the build when the configuration names none (read once). */
export function nodeBuild(): string {
  if (cached === undefined) {
    let version: string | undefined;
    try {
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
      if (typeof pkg.version === 'string') version = pkg.version;
    } catch {
      // A node deployed without its package.json still serves; its build is then unknown.
    }
    cached = buildLabel(process.env, version);
  }
  return cached;
}
