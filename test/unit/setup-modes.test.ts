/**
 * scripts/setup.sh installs, per job, only what that job needs: `npm run synth` / `npm run deploy` (--synth) and
 * `npm start` (--runtime) never install redis-server, Chromium, LocalStack or cfn-lint. Checked with its dry run
 * (STRATA_SETUP_DRY_RUN=1, which prints `would install <part>` and installs nothing) on a bare machine: a copy
 * of the script in an empty folder (no node_modules, .tools or .localstack), with a PATH from which
 * redis-server, Chromium, Python and pip are removed, and a HOME without pyenv. The full mode on the same
 * machine is the control: it does want them.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HIDDEN = /^(redis-|chromium|google-chrome|python|pip|pyenv|localstack|cfn-lint)/;
const TEST_ONLY = ['redis-server', 'chromium', 'localstack', 'cfn-lint'];

describe('scripts/setup.sh modes on a bare machine (dry run)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'strata-setup-'));
  const repo = join(dir, 'repo');
  const bin = join(dir, 'bin');

  beforeAll(() => {
    mkdirSync(join(repo, 'scripts'), { recursive: true });
    copyFileSync(join(ROOT, 'scripts', 'setup.sh'), join(repo, 'scripts', 'setup.sh'));
    mkdirSync(bin);
    for (const d of (process.env.PATH ?? '').split(delimiter)) {
      let names: string[];
      try {
        names = readdirSync(d);
      } catch {
        continue;
      }
      for (const name of names) {
        if (HIDDEN.test(name)) continue;
        try {
          symlinkSync(join(d, name), join(bin, name)); // the first on PATH wins, as in a shell
        } catch {
          // already linked from an earlier PATH entry
        }
      }
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The parts the dry run of `mode` would install. */
  function wouldInstall(...args: string[]): string[] {
    const out = execFileSync('bash', [join(repo, 'scripts', 'setup.sh'), ...args], {
      env: { PATH: bin, HOME: join(dir, 'home'), STRATA_SETUP_DRY_RUN: '1' },
      encoding: 'utf8',
    });
    expect(out).toMatch(/dry run \(\w+\): installed nothing/);
    return [...out.matchAll(/would install (\S+)/g)].map((m) => m[1]!);
  }

  it("for npm run synth: npm packages and the cache nodes' arm64 lmdb (and Node 24 where the system one is older), nothing else", () => {
    const parts = wouldInstall('--synth');
    expect(parts).toEqual(expect.arrayContaining(['npm-packages', 'lmdb-linux-arm64']));
    expect(parts.filter((p) => p !== 'node-24').sort()).toEqual(['lmdb-linux-arm64', 'npm-packages']);
  });

  it('for npm start: npm packages (and Node 24 where the system one is older), nothing else', () => {
    expect(wouldInstall('--runtime').filter((p) => p !== 'node-24')).toEqual(['npm-packages']);
  });

  it('for the tests (the control): also redis-server, Chromium, LocalStack and cfn-lint', () => {
    const parts = wouldInstall();
    expect(parts).toEqual(expect.arrayContaining(['npm-packages', 'lmdb-linux-arm64', ...TEST_ONLY]));
  });

  it('is what npm run synth / deploy run first, and npm start its runtime mode', () => {
    const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts.synth).toBe('bash scripts/setup.sh --synth && bash scripts/run-node.sh cdk/bin/cli.ts synth');
    expect(scripts.deploy).toBe('bash scripts/setup.sh --synth && bash scripts/run-node.sh cdk/bin/cli.ts deploy');
    expect(readFileSync(join(ROOT, 'scripts', 'start.sh'), 'utf8')).toMatch(/^bash scripts\/setup\.sh --runtime$/m);
  });

  it('installs with npm ci, which never rewrites the committed lock', () => {
    const script = readFileSync(join(ROOT, 'scripts', 'setup.sh'), 'utf8');
    expect(script).toMatch(/^\s+npm ci /m);
    expect(script).not.toMatch(/^\s+npm install --no-audit/m);
  });
});
