import { fleetCapacityCost, priceBook, spotBreakEven, spotHourly } from '../../core/cost/model/index.js';

describe('spot cost model', () => {
  const book = priceBook('aws-2026-11', 'us-east-1');
  const od = book.prices.ec2.instances['r7g.large']!.hourly;

  it('prices spot below on-demand by the stated discount', () => {
    expect(spotHourly(book, 'r7g.large')).toBeCloseTo(od * 0.4, 10);
  });

  it('saves nothing on demand, everything above the base in a mixed fleet, all nodes on spot', () => {
    const cost = (capacity: 'on-demand' | 'spot' | 'mixed') =>
      fleetCapacityCost({ book, instanceType: 'r7g.large', nodes: 4, capacity, onDemandBase: 1 });
    expect(cost('on-demand').spotSavingsMonthly).toBe(0);
    const perNode = (od - spotHourly(book, 'r7g.large')) * book.hoursPerMonth;
    expect(cost('mixed').spotSavingsMonthly).toBeCloseTo(3 * perNode, 6);
    expect(cost('spot').spotSavingsMonthly).toBeCloseTo(4 * perNode, 6);
    expect(cost('spot').onDemandMonthly).toBeCloseTo(cost('on-demand').configuredMonthly, 6);
  });

  it('turns spot down when interruptions cost more per hour than the discount saves (paper 002 lifetimes)', () => {
    const calm = spotBreakEven({
      onDemandHourly: 0.1,
      spotHourly: 0.04,
      interruptionsPerHour: 0.05 / 730,
      costPerInterruption: 2,
    });
    expect(calm.worthIt).toBe(true);
    expect(calm.expectedLifetimeHours).toBeCloseTo(14_600, 0);
    const stormy = spotBreakEven({ onDemandHourly: 0.1, spotHourly: 0.04, interruptionsPerHour: 0.1, costPerInterruption: 2 });
    expect(stormy.worthIt).toBe(false);
    expect(stormy.survival(10)).toBeCloseTo(0.9 ** 10, 10);
  });
});
