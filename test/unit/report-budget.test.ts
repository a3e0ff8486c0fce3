import { appendWithinBudget, jsonBytes } from '../../core/workflows/steps/report-budget.js';

describe('workflow report budget', () => {
  const line = (i: number, keyBytes = 10) => ({
    ns: 'n',
    key: 'k'.repeat(keyBytes) + i,
    version: i,
    bytes: 1000,
    outcome: 'moved',
  });

  it('keeps lines in order until the byte budget, counting the rest', () => {
    const lines = Array.from({ length: 50 }, (_, i) => line(i, 500)); // keys of up to 512 bytes make long lines
    const { report, omitted } = appendWithinBudget([], lines, { maxLines: 200, maxBytes: 8 * 1024 });
    expect(report.length + omitted).toBe(50);
    expect(report).toEqual(lines.slice(0, report.length));
    expect(jsonBytes(report)).toBeLessThanOrEqual(8 * 1024);
    // One more line would not have fitted.
    expect(jsonBytes([...report, lines[report.length]!])).toBeGreaterThan(8 * 1024);
  });

  it('keeps at most maxLines, and appends to what an earlier batch kept', () => {
    const first = appendWithinBudget(
      [],
      Array.from({ length: 150 }, (_, i) => line(i)),
      { maxLines: 200, maxBytes: 1 << 20 },
    );
    expect(first).toMatchObject({ omitted: 0 });
    const second = appendWithinBudget(
      first.report,
      Array.from({ length: 100 }, (_, i) => line(150 + i)),
      { maxLines: 200, maxBytes: 1 << 20 },
    );
    expect(second.report).toHaveLength(200);
    expect(second.omitted).toBe(50);
    expect(second.report[199]).toEqual(line(199));
  });

  it('counts multi-byte characters as the bytes they take', () => {
    const wide = { key: '日本語'.repeat(100) }; // 900 bytes of UTF-8, 300 characters
    const { report } = appendWithinBudget([], [wide, wide], { maxLines: 10, maxBytes: 1000 });
    expect(report).toHaveLength(1);
    expect(jsonBytes(report)).toBeLessThanOrEqual(1000);
  });
});
