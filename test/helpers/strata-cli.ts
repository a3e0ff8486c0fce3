import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './services.js';

const run = promisify(execFile);

export interface CliRun {
  /** The exit code (-1 when the process did not exit with one). */
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `strata <args>`: the SDK's CLI (sdk/src/cli.ts under tsx) in its own process, with `STRATA_ENDPOINT` = `endpoint`
 * and stdio not a terminal. Resolves whatever the exit code.
 */
export async function runStrataCli(endpoint: string, args: readonly string[]): Promise<CliRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, STRATA_ENDPOINT: endpoint };
  delete env.NODE_OPTIONS;
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', join(ROOT, 'sdk/src/cli.ts'), ...args], {
      cwd: ROOT,
      env,
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout: string; stderr: string };
    return { code: err.code ?? -1, stdout: err.stdout, stderr: err.stderr };
  }
}
