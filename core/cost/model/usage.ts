import type { CostTier } from '../../metrics/metric-catalog.js';

/**
 * What Strata used over a time window: the input the cost model prices (live-cost.ts). Plain data; how it is
 * read from AWS is the publisher's job (cost/publisher/usage-reader.ts), and the local server fills it from its own
 * counters.
 */

/** A half-open time range [start, end). */
export interface TimeWindow {
  readonly start: Date;
  readonly end: Date;
}

export interface FleetInstance {
  readonly id: string;
  readonly type: string;
  /** EC2 state name: only `running` instances are billed. */
  readonly state: string;
}

export interface FleetVolume {
  readonly id: string;
  /** `gp3`, `gp2`, ...: only gp3 is in the catalog. */
  readonly type: string;
  readonly sizeGiB: number;
  readonly iops: number;
  readonly throughputMiBps: number;
}

/** A Lambda function whose invocations are billed to a tier. */
export interface CostedFunction {
  readonly name: string;
  readonly memoryMb: number;
  readonly tier: CostTier;
}

export interface NamespaceUsage {
  readonly namespace: string;
  /** Lookups answered (hits in any tier, origin loads) or missed. */
  readonly requests: number;
  /** Value bytes written and read. */
  readonly bytes: number;
}

export interface ColdUsage {
  readonly bytes: number;
  readonly objects: number;
  readonly storageSource: 'cloudwatch' | 'listing';
  /** The listing hit its limit; bytes and objects are lower bounds. */
  readonly truncated: boolean;
  readonly getRequests: number;
  readonly putRequests: number;
  readonly requestSource: 'cloudwatch' | 'estimate';
}

export interface FunctionUsage extends CostedFunction {
  readonly invocations: number;
  /** Billed compute: duration × memory, in GB-seconds. */
  readonly gbSeconds: number;
}

/** Usage over one window (normally the last hour): the input of {@link priceLiveUsage}. */
export interface LiveUsage {
  readonly window: TimeWindow;
  readonly fleet: { readonly instances: readonly FleetInstance[]; readonly volumes: readonly FleetVolume[] };
  readonly hot?: { readonly bytesUsed: number; readonly ecpus: number };
  readonly cold?: ColdUsage;
  readonly apiRequests: number;
  readonly functions: readonly FunctionUsage[];
  /**
   * Lookups answered in the window: the `Hits` metric over every tier, origin loads included, as the Performance
   * dashboard's hit ratio counts them (a lookup that found nothing anywhere is a miss).
   */
  readonly hits: number;
  readonly namespaces: readonly NamespaceUsage[];
}
