import { runCostCli } from '../../core/composition/cost-cli.js';
import { PAPER_DISCREPANCIES } from '../../core/cost/model/paper-2010-tables.js';

function run(...argv: string[]): { code: number; stdout: string; stderr: string } {
  let stdout = '';
  let stderr = '';
  const code = runCostCli(argv, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

const lineWith = (text: string, ...parts: string[]): string => {
  const line = text.split('\n').find((l) => parts.every((p) => l.includes(p)));
  if (!line) throw new Error(`no line with ${parts.join(' & ')} in:\n${text}`);
  return line;
};

describe('strata cost', () => {
  describe('--paper-2010 --tables', () => {
    const { code, stdout } = run('cost', '--paper-2010', '--tables');

    it("prints Tables III and IV with the paper's numbers where its formulas give them", () => {
      expect(code).toBe(0);
      expect(stdout).toContain('TABLE III');
      expect(stdout).toContain('TABLE IV');
      expect(lineWith(stdout, '1 KB', 'm1.small-disk')).toContain('$63.24 = $63.24 + $0.00');
      expect(lineWith(stdout, '1 KB', 'm1.small-disk')).toContain('$17.23');
      expect(lineWith(stdout, '1 KB', 'm1.xlarge-mem')).toContain('$505.92 = $505.92 + $0.00');
      expect(lineWith(stdout, '1 MB', 'm1.small-mem')).toContain('$63.54 = $63.24 + $0.30');
      expect(lineWith(stdout, '5 MB', 'm1.small-disk')).toContain('$64.74 = $63.24 + $1.50');
      expect(lineWith(stdout, '50 MB', 'm1.small-disk')).toContain('$97.40');
      expect(lineWith(stdout, '50 MB', 'm1.xlarge-disk')).toContain('$63.36');
      expect(lineWith(stdout, '1 KB', 'S3')).toContain('$0.0007');
      expect(lineWith(stdout, '1 MB', 'S3')).toContain('$0.38 = $0.075 + $0.002 + $0.30');
      expect(lineWith(stdout, '5 MB', 'S3')).toContain('$1.88 = $0.375 + $0.002 + $1.50');
      expect(lineWith(stdout, '50 MB', 'S3')).toContain('$18.75 = $3.75 + $0.002 + $15.00');
      expect(lineWith(stdout, '50 MB', 'm1.xlarge-ebs')).toContain('$88.63');
    });

    it("prints the formula's value where the paper is wrong, and the paper's beside it with the discrepancy id", () => {
      const xl = lineWith(stdout, '5 MB', 'm1.xlarge-mem');
      expect(xl).toContain('$507.42 = $505.92 + $1.50');
      expect(xl).toContain('C 506.78 [D8]');
      expect(lineWith(stdout, '1 KB', 'S3')).toContain('C 0.0023 [D12]');
      expect(lineWith(stdout, '50 MB', 'S3')).toContain("C/S' 233.87 ≈");
    });

    it('lists every recorded discrepancy after the tables', () => {
      for (const d of PAPER_DISCREPANCIES) expect(stdout).toMatch(new RegExp(`^${d.id}\\s`, 'm'));
    });
  });

  it('ranks placements for a workload, S3 first for 1 MB values at 2,000 requests a month', () => {
    const { code, stdout } = run('cost', '--value-size', '1MB', '--keys', '500', '--requests-per-month', '2000');
    expect(code).toBe(0);
    expect(stdout).toMatch(/catalog aws-2026-11 \(2026\.11\.0\), us-east-1/);
    expect(stdout).toMatch(/^ *1 {2}s3:STANDARD /m);
    expect(stdout).toMatch(/C_Alloc.*C_S.*C_R.*C_IO.*C\/S/);
  });

  it('honours --persistent, --region, --rank-by and --top', () => {
    const { code, stdout } = run(
      '--value-size',
      '1MB',
      '--keys',
      '500',
      '--requests-per-month',
      '200k',
      '--persistent',
      '--region',
      'eu-west-1',
      '--rank-by',
      'cost',
      '--top',
      '3',
    );
    expect(code).toBe(0);
    expect(stdout).toContain('eu-west-1');
    expect(stdout).toContain('ranked by cost; top 3 of');
    expect(stdout).toMatch(/Not ranked \(volatile: data is lost with the node\): elasticache-serverless/);
    expect(stdout).toMatch(/^ *1 {2}s3:/m);
    expect(stdout).not.toMatch(/^ *4 {2}/m);
  });

  it('prints JSON with --json', () => {
    const { code, stdout } = run('--value-size', '50MB', '--keys', '500', '--requests-per-month', '200000', '--json');
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as { recommendations: { rank: number; placement: { id: string } }[] };
    expect(report.recommendations[0]).toMatchObject({ rank: 1, placement: { id: expect.stringMatching(/xlarge/) } });
  });

  it('explains bad input on stderr with exit code 2, and prints the usage for --help', () => {
    const bad = run('--value-size', 'huge', '--keys', '5', '--requests-per-month', '1');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/not a size: "huge"/);
    const missing = run('--value-size', '1MB');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--keys is required/);
    const region = run('--value-size', '1MB', '--keys', '5', '--requests-per-month', '1', '--region', 'mars-1');
    expect(region.stderr).toMatch(/region/);
    expect(run().code).toBe(2);
    const help = run('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--paper-2010 --tables');
  });

  it('lists the catalogs with their dates', () => {
    const { stdout } = run('--catalogs');
    expect(stdout).toMatch(/aws-2026-11 .*2026-11.*us-east-1, eu-west-1/);
    expect(stdout).toMatch(/paper-2010 .*2010/);
  });
});
