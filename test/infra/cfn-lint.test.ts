import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ENVIRONMENT_NAMES } from '../../cdk/config/schema.js';
import { REPO_ROOT } from '../../cdk/lib/packaging.js';
import { synthesized } from './helpers/synth.js';

/** Installed by scripts/setup.sh into the LocalStack venv (pinned in scripts/localstack/constraints.txt). */
const CFN_LINT = join(REPO_ROOT, '.localstack', 'venv', 'bin', 'cfn-lint');

interface Finding {
  Level: 'Error' | 'Warning' | 'Informational';
  Rule: { Id: string };
  Message: string;
  Filename: string;
  Location: { Path?: (string | number)[] };
}

describe('cfn-lint', () => {
  it('is installed (run bash scripts/setup.sh)', () => {
    if (!existsSync(CFN_LINT))
      throw new Error(
        `cfn-lint is not installed at ${CFN_LINT}: run \`bash scripts/setup.sh\` (it installs cfn-lint into .localstack/venv), then re-run the infra tests`,
      );
  });

  const environments = ENVIRONMENT_NAMES.map((env) => [env, synthesized(env)] as const);
  it.each(environments)(
    'finds no errors in any %s template',
    (env, s) => {
      if (!existsSync(CFN_LINT)) throw new Error(`cfn-lint is missing (${CFN_LINT}); run \`bash scripts/setup.sh\``);
      const templates = readdirSync(s.outdir)
        .filter((f) => f.endsWith('.template.json'))
        .map((f) => join(s.outdir, f));
      expect(templates).toHaveLength(6);
      const run = spawnSync(CFN_LINT, ['--format', 'json', '--regions', s.config.region, '--', ...templates], {
        encoding: 'utf8',
      });
      if (run.error) throw run.error;
      const findings = JSON.parse(run.stdout || '[]') as Finding[];
      const describe = (f: Finding) =>
        `${f.Level} ${f.Rule.Id} ${f.Filename.split('/').pop()} ${(f.Location.Path ?? []).join('.')}: ${f.Message}`;
      const warnings = findings.filter((f) => f.Level !== 'Error');
      if (warnings.length)
        process.stdout.write(`cfn-lint ${env}: ${warnings.length} non-error finding(s)\n${warnings.map(describe).join('\n')}\n`);
      expect(findings.filter((f) => f.Level === 'Error').map(describe)).toEqual([]);
    },
    120_000,
  );
});
