/**
 * From a cost rate to the figures budgets are judged by. All calendar arithmetic is in UTC (AWS bills by the
 * UTC month).
 *
 *   ProjectedMonthlyCost = month-to-date + rate × hours left
 *     month-to-date = Σ over the hours of this month before the current one of that hour's average published
 *                     TotalCostPerHour (an hour with no datapoint, e.g. before the first deploy, counts as $0)
 *     hours left    = from the start of the current hour to the start of next month (the current hour is
 *                     charged at the current rate)
 *   CostPer1000Hits = rate / (hits in the last hour / 1,000); undefined without hits (hits: the Hits metric over
 *                     every tier, origin loads included, as the Performance dashboard counts them).
 */

const HOUR_MS = 3_600_000;

export function startOfMonthUtc(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

export function startOfNextMonthUtc(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

export function startOfHourUtc(at: Date): Date {
  return new Date(Math.floor(at.getTime() / HOUR_MS) * HOUR_MS);
}

/** Hours from the start of `at`'s hour to the end of its month. */
export function hoursLeftInMonth(at: Date): number {
  return (startOfNextMonthUtc(at).getTime() - startOfHourUtc(at).getTime()) / HOUR_MS;
}

/** The completed hours of `at`'s month: the range whose hourly averages make up the month-to-date. */
export function completedHoursOfMonth(at: Date): { start: Date; end: Date } {
  return { start: startOfMonthUtc(at), end: startOfHourUtc(at) };
}

export interface MonthlyProjection {
  readonly monthToDate: number;
  readonly hoursLeft: number;
  readonly projected: number;
}

/**
 * Month-to-date from hourly average rates (one per completed hour; points outside the month's completed hours
 * are ignored), plus the current rate over the hours left.
 * @example projectMonthlyCost(new Date('2026-11-30T22:10:00Z'), 2, [{ timestamp: new Date('2026-11-30T21:00:00Z'), value: 1 }]).projected // 1 + 2 × 2 = 5
 */
export function projectMonthlyCost(
  at: Date,
  ratePerHour: number,
  hourlyRates: readonly { timestamp: Date; value: number }[],
): MonthlyProjection {
  if (!Number.isFinite(ratePerHour) || ratePerHour < 0)
    throw new RangeError(`rate must be a finite number >= 0, got ${ratePerHour}`);
  const { start, end } = completedHoursOfMonth(at);
  const monthToDate = hourlyRates
    .filter((p) => p.timestamp >= start && p.timestamp < end && Number.isFinite(p.value))
    .reduce((a, p) => a + p.value, 0);
  const hoursLeft = hoursLeftInMonth(at);
  return { monthToDate, hoursLeft, projected: monthToDate + ratePerHour * hoursLeft };
}

/** USD per 1,000 hits at `ratePerHour` with `hitsLastHour`; undefined when there were no hits. */
export function costPer1000Hits(ratePerHour: number, hitsLastHour: number): number | undefined {
  return hitsLastHour > 0 ? ratePerHour / (hitsLastHour / 1000) : undefined;
}
