import { spawnSync } from 'node:child_process';
import * as z from 'zod';
import { REPO_ROOT } from '../../cdk/lib/packaging.js';
import { formatIssues, issueLines } from '../../core/util/zod-issues.js';

describe('zod issue messages', () => {
  const schema = z.strictObject({ a: z.strictObject({ b: z.array(z.number()) }), c: z.string() });

  it('names each issue by its path, and the whole input by the root label', () => {
    const r = schema.safeParse({ a: { b: [1, 'x'] }, c: 3 });
    expect(r.success).toBe(false);
    expect(formatIssues(r.error!.issues)).toMatch(/^a\.b\.1: .+; c: .+$/);
    const root = z.number().safeParse('x');
    expect(issueLines(root.error!.issues)).toEqual([expect.stringMatching(/^\(root\): /)]);
    expect(formatIssues(root.error!.issues, { root: '(body)' })).toMatch(/^\(body\): /);
  });

  // One formatter, not a copy per module: a new copy of the mapping fails here (use formatIssues / issueLines).
  it('is the only place that maps zod issues to path: message text', () => {
    const pattern = 'issues\\.map\\(\\(i\\) => `\\$\\{i\\.path';
    const paths = ['core', 'cachenode', 'lambdas', 'sdk/src', 'scripts', ':!core/util/zod-issues.ts'];
    const grep = spawnSync('git', ['grep', '-n', '-E', pattern, '--', ...paths], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    // git grep exits 1 when nothing matches.
    expect([grep.status, grep.stdout]).toEqual([1, '']);
  });
});
