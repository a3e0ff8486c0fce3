import type { PaperQuantity } from './paper-2010-tables.js';

/**
 * Cells of paper 001's Tables III and IV that its own formulas and Table I prices do not give, even allowing
 * for the rounding of every printed number (including the printed speedups). The calculator asserts the
 * formula's value; each entry says what the paper printed and, where we can tell, why.
 *
 * A test recomputes every cell and checks that this list is exactly the set of disagreeing cells.
 */
export type DiscrepancyKind =
  /** A total that is not the sum of its own printed terms. */
  | 'sum'
  /** Computed correctly from another wrong cell of the same row. */
  | 'propagated'
  /** A C/S or total left a term out, or kept it at the 2,000-request value. */
  | 'omitted-term'
  /** Two cells of one row were computed from different inputs. */
  | 'inconsistent-input'
  /** Two components appear swapped. */
  | 'swapped'
  /** Off in the last printed digit(s), beyond any rounding of the inputs. */
  | 'last-digit'
  /** No combination of the row's terms we tried gives the printed value. */
  | 'unexplained';

export interface PaperDiscrepancy {
  readonly id: string;
  readonly table: 'III' | 'IV';
  readonly unitSize: string;
  readonly placement: string;
  readonly requests: 2000 | 200_000;
  readonly quantity: PaperQuantity;
  /** As printed in the paper. */
  readonly published: number;
  /** What the formulas give (6 significant digits). */
  readonly formula: number;
  readonly kind: DiscrepancyKind;
  readonly explanation: string;
}

const d = (
  id: string,
  table: 'III' | 'IV',
  unitSize: string,
  placement: string,
  requests: 2000 | 200_000,
  quantity: PaperQuantity,
  published: number,
  formula: number,
  kind: DiscrepancyKind,
  explanation: string,
): PaperDiscrepancy => ({ id, table, unitSize, placement, requests, quantity, published, formula, kind, explanation });

export const PAPER_DISCREPANCIES: readonly PaperDiscrepancy[] = [
  // Table III (volatile)
  d('D1', 'III', '1 KB', 'm1.small-mem', 200_000, 'C/S', 0.03, 0.0240614, 'last-digit', '($63.24 + $0.03) / 2629.52 = $0.024; $0.03 is the value of the m1.small-disk row below'),
  d('D2', 'III', '1 KB', 'm1.xlarge-disk', 2000, 'C/S', 139.57, 139.372, 'last-digit', '$505.92 / 3.63 = $139.37 (a 3 printed as 5)'),
  d('D3', 'III', '1 MB', 'm1.small-disk', 200_000, 'C/S', 4.06, 3.33, 'unexplained', '($63.24 + $30.00) / 28 = $3.33'),
  d('D4', 'III', '1 MB', 'm1.xlarge-mem', 200_000, 'C/S', 1.53, 1.5431, 'last-digit', '($505.92 + $30.00) / 347.3 = $1.543'),
  d('D5', 'III', '1 MB', 'm1.xlarge-disk', 200_000, 'C/S', 2.94, 2.96859, 'last-digit', '($505.92 + $30.00) / 180.53 = $2.969'),
  d('D6', 'III', '5 MB', 'm1.small-mem', 2000, 'C/S', 96.27, 134.6, 'inconsistent-input', 'C is priced for 7 instances ($442.68 = 7 x $63.24) but C/S for 5: (5 x $63.24 + $1.50) / 3.3 = $96.27; with 7, $444.18 / 3.3 = $134.60'),
  d('D7', 'III', '5 MB', 'm1.small-mem', 200_000, 'C/S', 4.26, 5.41409, 'inconsistent-input', 'as D6: (5 x $63.24 + $150) / 109.47 = $4.26; with the 7 instances of C, ($442.68 + $150) / 109.47 = $5.41'),
  d('D8', 'III', '5 MB', 'm1.xlarge-mem', 2000, 'C', 506.78, 507.42, 'sum', '$505.92 + $1.50 = $507.42, not $506.78 (its C/S $140.78 follows the wrong total but stays within the rounding of S = 3.6)'),
  d('D9', 'III', '5 MB', 'm1.xlarge-disk', 2000, 'C', 506.78, 507.42, 'sum', '$505.92 + $1.50 = $507.42, not $506.78 (its C/S $149.94 = $506.78 / 3.38 follows the wrong total, within the rounding of S)'),
  d('D10', 'III', '50 MB', 'm1.small-disk', 2000, 'C', 78.74, 78.24, 'sum', '$63.24 + $15.00 = $78.24, not $78.74'),
  d('D11', 'III', '50 MB', 'm1.xlarge-disk', 2000, 'C/S', 152.85, 157.378, 'omitted-term', 'C/S leaves out C_IO: $505.92 / 3.31 = $152.85; with it, $520.92 / 3.31 = $157.38'),
  // Table IV (persistent)
  d('D12', 'IV', '1 KB', 'S3', 2000, 'C', 0.0023, 0.002375, 'sum', 'C_S ($0.000075 for 500 KB) was rounded to $0.00 before adding: $0.000075 + $0.002 + $0.0003 = $0.0024'),
  d('D13', 'IV', '1 KB', 'm1.small-ebs', 2000, 'C', 63.49, 63.2406, 'sum', 'the printed terms $63.24 + $0.0002 + $0.00 + $0.0003 sum to $63.24; $63.49 is $0.25 (the 5 MB rows\' C_S) too much'),
  d('D14', 'IV', '1 KB', 'm1.small-ebs', 2000, 'C_S', 0.0002, 0.00005, 'swapped', 'C_S = 500 KB x $0.10/GB = $0.00005; $0.0002 is C_R (2,000 I/Os x $0.10 per million), which the paper prints as $0.00'),
  d('D15', 'IV', '1 KB', 'm1.small-ebs', 2000, 'C/S', 17.54, 17.4698, 'propagated', 'follows D13: $63.49 / 3.62 = $17.54; with the correct total, $63.24 / 3.62 = $17.47'),
  d('D16', 'IV', '1 KB', 'm1.small-ebs', 200_000, 'C-C_Alloc', 0.48, 0.05005, 'unexplained', 'C_S + C_R + C_IO = $0.00005 + $0.02 + $0.03 = $0.05 (C_IO alone is $0.03)'),
  d('D17', 'IV', '1 KB', 'm1.small-ebs', 200_000, 'C/S', 0.04, 0.0318922, 'last-digit', '($63.24 + $0.05) / 1984.5 = $0.032 (with the paper\'s $0.48 it is still $0.032)'),
  d('D18', 'IV', '1 KB', 'm1.xlarge-ebs', 2000, 'C', 506.17, 505.921, 'sum', 'as D13: the printed terms sum to $505.92; $506.17 is $0.25 too much (its C/S $141.39 follows, within the rounding of S)'),
  d('D19', 'IV', '1 KB', 'm1.xlarge-ebs', 2000, 'C_S', 0.0002, 0.00005, 'swapped', 'as D14'),
  d('D20', 'IV', '1 KB', 'm1.xlarge-ebs', 200_000, 'C-C_Alloc', 0.48, 0.05005, 'unexplained', 'as D16'),
  d('D21', 'IV', '1 KB', 'm1.xlarge-ebs', 200_000, 'C/S', 0.25, 0.241894, 'last-digit', '($505.92 + $0.05) / 2091.7 = $0.242'),
  d('D22', 'IV', '1 MB', 'S3', 2000, 'C/S', 0.12, 0.111209, 'last-digit', '$0.377 / 3.39 = $0.111 (even the rounded $0.38 / 3.39 = $0.112)'),
  d('D23', 'IV', '1 MB', 'S3', 200_000, 'C-C_Alloc', 30.01, 30.275, 'unexplained', 'C_S + C_R + C_IO = $0.075 + $0.20 + $30.00 = $30.28 (C_IO alone is $30.00)'),
  d('D24', 'IV', '1 MB', 'm1.small-ebs', 200_000, 'C-C_Alloc', 30.25, 30.07, 'unexplained', 'C_S + C_R + C_IO = $0.05 + $0.02 + $30.00 = $30.07; $30.25 would take the 5 MB rows\' C_S'),
  d('D25', 'IV', '1 MB', 'm1.small-ebs', 200_000, 'C/S', 6.87, 6.85095, 'last-digit', '($63.24 + $30.07) / 13.62 = $6.85 (with the paper\'s $30.25, $6.86)'),
  d('D26', 'IV', '1 MB', 'm1.xlarge-ebs', 200_000, 'C-C_Alloc', 30.25, 30.07, 'unexplained', 'as D24'),
  d('D27', 'IV', '1 MB', 'm1.xlarge-ebs', 200_000, 'C/S', 4.01, 4.00112, 'last-digit', '($505.92 + $30.07) / 133.96 = $4.001 (with the paper\'s $30.25, $4.003)'),
  d('D28', 'IV', '5 MB', 'S3', 2000, 'C/S', 0.58, 0.574006, 'last-digit', '$1.877 / 3.27 = $0.574'),
  d('D29', 'IV', '5 MB', 'S3', 200_000, 'C-C_Alloc', 150, 150.575, 'omitted-term', 'prints C_IO alone ($150.00) where the EBS rows print C_S + C_R + C_IO; with C_S $0.375 and C_R $0.20 it is $150.58'),
  d('D30', 'IV', '5 MB', 'S3', 200_000, 'C/S', 7.53, 7.54006, 'omitted-term', 'C_R kept at its 2,000-request value: ($0.375 + $0.002 + $150) / 19.97 = $7.53; with 200,000 GETs ($0.20), $7.54. The 50 MB row does the same ($233.87 against $233.90), hidden there by the rounding of S = 6.43'),
  d('D31', 'IV', '50 MB', 'S3', 200_000, 'C-C_Alloc', 1500, 1503.95, 'omitted-term', 'as D29: C_S $3.75 + C_R $0.20 + C_IO $1,500 = $1,503.95'),
  d('D32', 'IV', '50 MB', 'm1.small-ebs', 200_000, 'C/S', 142.7, 141.187, 'unexplained', '($63.24 + $1,502.52) / 11.09 = $141.19'),
  d('D33', 'IV', '50 MB', 'm1.xlarge-ebs', 2000, 'C', 520.42, 523.42, 'sum', 'the printed terms $505.92 + $2.50 + $0.00 + $15.00 sum to $523.42; $520.42 is $3.00 short'),
  d('D34', 'IV', '50 MB', 'm1.xlarge-ebs', 2000, 'C/S', 164.69, 165.639, 'propagated', 'follows D33: $520.42 / 3.16 = $164.69; with the correct total, $523.42 / 3.16 = $165.64'),
];
