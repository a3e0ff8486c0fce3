import { catalogSummaries, type CatalogSummary } from './price-catalog.js';
import type { CostBreakdown } from './formulas.js';
import {
  computePaperRow,
  findDiscrepancy,
  cellKey,
  PAPER_DISCREPANCIES,
  PAPER_KEYS,
  PAPER_ROWS,
  PAPER_REQUESTS,
  type PaperQuantity,
  type PaperRow,
  type PaperRowResult,
} from './paper-2010-tables.js';
import type { RecommendationReport } from './recommender.js';
import { formatNumber, formatSize, formatUsd } from './units.js';

type Align = 'l' | 'r';

/** A plain-text table: columns padded to their widest cell, two spaces apart. */
export function renderTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[] = [],
): string {
  const width = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (align[i] === 'r' ? c.padStart(width[i] ?? 0) : c.padEnd(width[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), line(width.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

const decimalsOf = (printed: string): number => printed.split('.')[1]?.length ?? 0;

/** A formula value at the precision the paper printed it with (so agreeing cells read the same). */
function atPaperPrecision(value: number, printed: string | undefined, money: boolean): string {
  if (printed === undefined) return money ? formatUsd(value) : formatNumber(value);
  const s = value.toFixed(decimalsOf(printed));
  return money ? `$${s}` : s;
}

const LABEL: Record<PaperQuantity, string> = {
  C: 'C',
  C_Alloc: 'C_Alloc',
  C_S: 'C_S',
  C_R: 'C_R',
  C_IO: 'C_IO',
  'C-C_Alloc': 'C-C_Alloc',
  'C/S': 'C/S',
};

type Component = 'C_Alloc' | 'C_S' | 'C_R' | 'C_IO';

function termsOf(row: PaperRow): Component[] {
  if (row.table === 'III') return ['C_Alloc', 'C_IO'];
  return row.placement.kind === 's3' ? ['C_S', 'C_R', 'C_IO'] : ['C_Alloc', 'C_S', 'C_R', 'C_IO'];
}

function valueOf(c: CostBreakdown, q: Component): number {
  return { C_Alloc: c.alloc, C_S: c.store, C_R: c.req, C_IO: c.io }[q];
}

/** The paper's printed values that differ from the formula's, marked ≈ (within rounding) or with a discrepancy id. */
function differences(row: PaperRow, results: readonly PaperRowResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    const printedCells = (r.requests === 2000 ? row.at2000 : row.at200k) as Partial<Record<PaperQuantity, string>>;
    const suffix = r.requests === 2000 ? '' : "'";
    for (const [q, printed] of Object.entries(printedCells) as [PaperQuantity, string][]) {
      const formula =
        q === 'C/S'
          ? r.costPerSpeedup
          : q === 'C'
            ? r.result.cost.total
            : q === 'C-C_Alloc'
              ? r.result.cost.total - r.result.cost.alloc
              : valueOf(r.result.cost, q);
      if (Number(formula.toFixed(decimalsOf(printed))) === Number(printed)) continue;
      const d = findDiscrepancy(cellKey(row.table, row.unitSize, row.placement.label, r.requests, q));
      out.push(`${LABEL[q]}${suffix} ${printed} ${d ? `[${d.id}]` : '≈'}`);
    }
  }
  return out.join(', ');
}

/**
 * Tables III and IV recomputed from Table I's prices and the measured speedups. Each formula value is printed
 * at the paper's precision; the last column lists what the paper printed where it differs (' marks the
 * 200,000-request columns): ≈ within the rounding of the paper's inputs, [Dn] a recorded discrepancy.
 */
export function renderPaperTables(): string {
  const sections: string[] = [];
  for (const table of ['III', 'IV'] as const) {
    const rows = PAPER_ROWS.filter((r) => r.table === table);
    const body = rows.map((row) => {
      const results = PAPER_REQUESTS.map((n) => computePaperRow(row, n));
      const [lo, hi] = results as [PaperRowResult, PaperRowResult];
      const terms = termsOf(row).map((q) => atPaperPrecision(valueOf(lo.result.cost, q), row.at2000[q], true));
      const total = atPaperPrecision(lo.result.cost.total, row.at2000.C, true);
      const varCost = hi.result.cost.total - hi.result.cost.alloc;
      return [
        `${row.unitSize} (${formatSize(row.valueBytes * PAPER_KEYS)} total)`,
        row.placement.label,
        row.speedup[0],
        `${total} = ${terms.join(' + ')}`,
        atPaperPrecision(lo.costPerSpeedup, row.at2000['C/S'], true),
        row.speedup[1],
        atPaperPrecision(varCost, row.at200k['C-C_Alloc'], true),
        atPaperPrecision(hi.costPerSpeedup, row.at200k['C/S'], true),
        differences(row, results),
      ];
    });
    const title =
      table === 'III'
        ? 'TABLE III. Monthly volatile cache subsistence costs: C = C_Alloc + C_IO'
        : 'TABLE IV. Monthly persistent cache subsistence costs: C_S3 = C_S + C_R + C_IO, C_EBS = C_Alloc + C_S + C_R + C_IO';
    const cHeader = table === 'III' ? 'C = C_Alloc + C_IO' : 'C = [C_Alloc +] C_S + C_R + C_IO';
    const varHeader = table === 'III' ? "C_IO'" : "C_S+C_R+C_IO'";
    sections.push(
      `${title}\n(S = measured speedup, C/S = cost per unit speedup; 2,000 requests a month, ' = 200,000)\n\n` +
        renderTable(['Unit size', 'Placement', 'S', cHeader, 'C/S', "S'", varHeader, "C/S'", 'Paper prints otherwise'], body, [
          'l',
          'l',
          'r',
          'l',
          'r',
          'r',
          'r',
          'r',
          'l',
        ]),
    );
  }
  sections.push(
    'Prices: paper 001 Table I (catalog paper-2010): m1.small $0.085/h, m1.xlarge $0.68/h, 744-hour month; S3 $0.15/GB-month,\n' +
      '$0.01 per 1,000 PUT, $0.01 per 10,000 GET; EBS $0.10/GB-month, $0.10 per million I/O; transfer out $0.15/GB; decimal GB.\n' +
      'Conventions read off the tables: C_R counts the R GETs only; EBS volumes hold exactly T and take one I/O per request;\n' +
      '5 MB in m1.small memory used 7 instances.',
  );
  return sections.join('\n\n');
}

/** The recorded discrepancies, one a line. */
export function renderDiscrepancies(): string {
  const rows = PAPER_DISCREPANCIES.map((d) => [
    d.id,
    `${d.table}`,
    d.unitSize,
    d.placement,
    d.requests === 2000 ? '2,000' : '200,000',
    d.quantity,
    String(d.published),
    formatNumber(d.formula, 4),
    d.kind,
    d.explanation,
  ]);
  return `Paper 001 cells its formulas do not give (${PAPER_DISCREPANCIES.length}):\n\n${renderTable(['id', 'table', 'size', 'placement', 'requests', 'cell', 'paper', 'formula', 'kind', 'why'], rows, ['l', 'l', 'l', 'l', 'r', 'l', 'r', 'r', 'l', 'l'])}`;
}

/** Ranked placements as a table, with the workload and the catalog it was priced with. */
export function renderRecommendations(report: RecommendationReport, top?: number): string {
  const w = report.workload;
  const shown = top === undefined ? report.recommendations : report.recommendations.slice(0, top);
  const rows = shown.map((r) => [
    String(r.rank),
    r.placement.id,
    r.placement.tier,
    r.placement.persistent ? 'yes' : 'no',
    r.nodes ? String(r.nodes) : '-',
    formatUsd(r.cost.alloc),
    formatUsd(r.cost.store),
    formatUsd(r.cost.req),
    formatUsd(r.cost.io),
    formatUsd(r.cost.access),
    formatUsd(r.cost.total),
    `${formatNumber(r.hitLatencyMs, 1)}${r.meetsLatency ? '' : ' (over target)'}`,
    formatNumber(r.speedup),
    formatUsd(r.costPerSpeedup),
    r.notes.join('; '),
  ]);
  const head =
    `Placements for ${formatSize(w.valueBytes)} values x ${w.keys} keys (${formatSize(w.valueBytes * w.keys)}), ` +
    `${w.requestsPerMonth.toLocaleString('en-US')} reads + ${Math.round(report.writesPerMonth).toLocaleString('en-US')} writes a month, ` +
    `${w.persistent ? 'persistent' : 'volatile allowed'}, origin ${formatNumber(w.serviceTimeMs / 1000, 3)} s per miss` +
    `${w.latencyTargetMs !== undefined ? `, hit target ${formatNumber(w.latencyTargetMs, 1)} ms` : ''}, ` +
    `${w.transferOut === 'internet' ? 'results leave AWS' : 'results stay in the region'}\n` +
    `Prices: catalog ${report.catalogId} (${report.catalogVersion}), ${report.region}; monthly USD; ranked by ${report.rankBy === 'cost' ? 'cost' : 'C/S (cost per unit speedup)'}` +
    `${shown.length < report.recommendations.length ? `; top ${shown.length} of ${report.recommendations.length}` : ''}`;
  const table = renderTable(
    [
      '#',
      'placement',
      'tier',
      'persistent',
      'k',
      'C_Alloc',
      'C_S',
      'C_R',
      'C_IO',
      'access',
      'C/month',
      'hit ms',
      'S',
      'C/S',
      'notes',
    ],
    rows,
    ['r', 'l', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
  );
  const byReason = new Map<string, string[]>();
  for (const e of report.excluded) byReason.set(e.reason, [...(byReason.get(e.reason) ?? []), e.placement.id]);
  const excluded = [...byReason].map(([reason, ids]) => `\nNot ranked (${reason}): ${ids.join(', ')}`).join('');
  return `${head}\n\n${table}${excluded ? `\n${excluded}` : ''}`;
}

/** The catalogs, one paragraph each: id, version, price dates, regions, and the description. */
export function renderCatalogs(rows: readonly CatalogSummary[] = catalogSummaries()): string {
  return rows
    .map((r) => `${r.id} (${r.version}, prices as of ${r.asOf.join(', ')}): ${r.regions.join(', ')}\n  ${r.description}`)
    .join('\n');
}
