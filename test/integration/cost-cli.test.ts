/**
 * `strata cost` end to end: the real local server (scripts/local/server.ts, which calls the service Lambda handler)
 * answers `/v1/cost/...`, and the real `strata` CLI runs as a separate process against it. What it prints must be
 * what the cost model gives in-process: the same text as `npm run cost` (core/composition/cost-cli.ts).
 */
import { runCostCli } from '../../core/composition/cost-cli.js';
import { renderDiscrepancies, renderPaperTables } from '../../core/cost/model/format.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { runStrataCli, type CliRun } from '../helpers/strata-cli.js';

let api: TestApi;

/** `strata <args>` in its own process, against the test server. */
const strata = (...args: string[]): Promise<CliRun> => runStrataCli(api.url, args);

/** What `npm run cost -- <args>` prints, computed in this process. */
function offline(...args: string[]): string {
  let stdout = '';
  expect(runCostCli(args, { stdout: (t) => void (stdout += t), stderr: (t) => void (stdout += t) })).toBe(0);
  return stdout;
}

/** The line of `text` with all of `parts`, in order. */
const line = (...parts: string[]): RegExp =>
  new RegExp(`^.*${parts.map((p) => p.replace(/[$.*+?()[\]{}|\\^]/g, '\\$&')).join('.*')}.*$`, 'm');

beforeAll(async () => {
  api = await startTestApi('embedded');
}, 300_000);

afterAll(async () => {
  await api?.close();
});

describe('strata cost against a running Strata', () => {
  it('--paper-2010 --tables prints Tables III and IV as the model computes them, the same text as npm run cost', async () => {
    const r = await strata('cost', '--paper-2010', '--tables');
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toBe(`${renderPaperTables()}\n\n${renderDiscrepancies()}\n`);
    expect(r.stdout).toBe(offline('--paper-2010', '--tables'));
    // Table III (volatile) and Table IV (persistent) values the formulas give, and a cell the paper got wrong.
    expect(r.stdout).toMatch(line('1 KB (500 KB total)', 'm1.small-disk', '$63.24 = $63.24 + $0.00', '$17.23'));
    expect(r.stdout).toMatch(line('50 MB (25 GB total)', 'm1.small-disk', '$97.40'));
    expect(r.stdout).toMatch(line('5 MB (2.5 GB total)', 'm1.xlarge-mem', '$507.42 = $505.92 + $1.50', 'C 506.78 [D8]'));
    expect(r.stdout).toMatch(line('5 MB (2.5 GB total)', 'S3', '$1.88 = $0.375 + $0.002 + $1.50'));
    expect(r.stdout).toMatch(line('50 MB (25 GB total)', 'm1.xlarge-ebs', '$88.63'));
    expect(r.stdout).toMatch(/^D34\s/m);
  }, 300_000);

  it('ranks placements for 1 MB x 500 keys at 2,000 requests a month: S3 first, EC2 cache nodes among them', async () => {
    const r = await strata('cost', '--value-size', '1MB', '--keys', '500', '--requests-per-month', '2000');
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toBe(offline('--value-size', '1MB', '--keys', '500', '--requests-per-month', '2000'));
    expect(r.stdout).toMatch(/ranked by C\/S \(cost per unit speedup\)/);
    expect(r.stdout).toMatch(/^ +1 {2}s3:STANDARD +cold +yes /m);
    expect(r.stdout).toMatch(/^ +\d+ {2}ec2-ebs:\S+ +warm +yes /m);

    const json = await strata('cost', '--value-size', '1MB', '--keys', '500', '--requests-per-month', '2000', '--json');
    expect(json.code).toBe(0);
    const answer = JSON.parse(json.stdout) as {
      rankBy: string;
      ranked: number;
      recommendations: { rank: number; placement: { id: string }; costPerSpeedup: number; meetsLatency: boolean }[];
    };
    expect(answer.rankBy).toBe('cost-per-speedup');
    expect(answer.recommendations).toHaveLength(answer.ranked);
    expect(answer.recommendations.map((x) => x.rank)).toEqual(answer.recommendations.map((_, i) => i + 1));
    const cs = answer.recommendations.map((x) => x.costPerSpeedup);
    expect(cs).toEqual([...cs].sort((a, b) => a - b));
    expect(answer.recommendations[0]!.placement.id).toBe('s3:STANDARD');
    expect(answer.recommendations.some((x) => x.placement.id.startsWith('ec2-ebs:'))).toBe(true);
  }, 300_000);

  it('lists the catalogs as npm run cost does', async () => {
    const r = await strata('cost', '--catalogs');
    expect([r.code, r.stdout]).toEqual([0, offline('--catalogs')]);
  }, 300_000);

  it("exits 2 with the server's message, the flag named, for a value it rejects; and with the usage for no workload", async () => {
    const bad = await strata('cost', '--value-size', 'huge', '--keys', '500', '--requests-per-month', '2000');
    expect([bad.code, bad.stdout, bad.stderr]).toEqual([
      2,
      '',
      'strata cost: --value-size: not a size: "huge" (use e.g. 1KB, 5MB, 2GiB or a byte count)\n',
    ]);
    const region = await strata(
      'cost',
      '--value-size',
      '1MB',
      '--keys',
      '500',
      '--requests-per-month',
      '2000',
      '--region',
      'mars-1',
    );
    expect([region.code, region.stderr]).toEqual([
      2,
      expect.stringMatching(/^strata cost: --region: .*no prices for region 'mars-1'/),
    ]);
    const none = await strata('cost');
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^strata: cost: give a workload .*\n\nusage: strata cost \[options\]/);
  }, 300_000);
});
