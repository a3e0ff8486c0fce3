import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../cdk/lib/packaging.js';

const sdk = join(REPO_ROOT, 'sdk');
const pkg = JSON.parse(readFileSync(join(sdk, 'package.json'), 'utf8')) as { bin: Record<string, string>; files: string[]; license: string };

describe('The SDK package as a fresh clone installs it', () => {
  // npm links a workspace's bin when it installs, before anything is built, and skips a bin whose target is
  // missing: a bin inside dist/ left `npx strata` failing on a fresh clone even after `npm run -w sdk build`.
  it('links the strata command to a committed file, not to build output', () => {
    const target = pkg.bin.strata!;
    expect(target.startsWith('dist/')).toBe(false);
    const tracked = execFileSync('git', ['ls-files', '--error-unmatch', join('sdk', target)], { cwd: REPO_ROOT, encoding: 'utf8' });
    expect(tracked.trim()).toBe(`sdk/${target}`);
  });

  it('says how to build the SDK when the command runs before the build', () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-sdk-bin-'));
    try {
      cpSync(join(sdk, pkg.bin.strata!), join(dir, 'bin', 'strata.mjs'));
      const run = spawnSync(process.execPath, [join(dir, 'bin', 'strata.mjs'), '--help'], { encoding: 'utf8' });
      expect(run.status).toBe(1);
      expect(run.stderr).toContain('npm run -w sdk build');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ships the license package.json names', () => {
    expect(pkg.license).toBe('Apache-2.0');
    expect(pkg.files).toContain('LICENSE');
    expect(readFileSync(join(sdk, 'LICENSE'), 'utf8')).toBe(readFileSync(join(REPO_ROOT, 'LICENSE'), 'utf8'));
  });
});
