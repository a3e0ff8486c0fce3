/**
 * Report lines a workflow carries in its state machine's state (Step Functions refuses payloads over 256 KiB):
 * appended up to a number of lines and a number of JSON bytes; what does not fit is counted, not kept.
 */
export interface ReportBudget {
  maxLines: number;
  /** JSON bytes of the whole report (the array's brackets and commas included). */
  maxBytes: number;
}

/** `kept` plus as many of `added` as fit the budget, in order; `omitted` counts the others. */
export function appendWithinBudget<L>(
  kept: readonly L[],
  added: readonly L[],
  budget: ReportBudget,
): { report: L[]; omitted: number } {
  const report = [...kept];
  let bytes = jsonBytes(report);
  let omitted = 0;
  for (const line of added) {
    const size = Buffer.byteLength(JSON.stringify(line)) + (report.length ? 1 : 0);
    if (report.length < budget.maxLines && bytes + size <= budget.maxBytes) {
      report.push(line);
      bytes += size;
    } else omitted++;
  }
  return { report, omitted };
}

/** Size of `JSON.stringify(lines)` in UTF-8 bytes. */
export function jsonBytes(lines: readonly unknown[]): number {
  return Buffer.byteLength(JSON.stringify(lines));
}
