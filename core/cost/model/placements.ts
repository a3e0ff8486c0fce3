import type { PriceBook } from './price-catalog.js';
import { s3StorageClasses, type S3StorageClass } from './catalogs/schema.js';

/**
 * Where a cache keeps its data. The paper's seven placements (S3; m1.small / m1.xlarge × memory, instance
 * disk, EBS) generalise to Strata's tiers:
 *   hot  — memory: ElastiCache Serverless or ElastiCache nodes (the paper's "-mem", run as a service)
 *   warm — EC2 cache nodes storing on gp3 EBS (the paper's "-ebs"; Graviton instead of m1)
 *   cold — S3 storage classes (the paper's S3)
 *   hot+cold — Strata's write-through pairing: memory serves reads, S3 keeps the data
 */
export type PlacementKind = 'ec2-mem' | 'ec2-disk' | 'ec2-ebs' | 's3' | 'elasticache-serverless' | 'elasticache-node' | 'tiered';
export type Tier = 'hot' | 'warm' | 'cold' | 'hot+cold';

export interface Placement {
  /** Stable id, e.g. `ec2-ebs:r7g.large`, `s3:STANDARD`, `elasticache-serverless+s3:STANDARD`. */
  readonly id: string;
  /** Short name for tables; the paper's names for its placements (`m1.small-mem`, `S3`). */
  readonly label: string;
  readonly kind: PlacementKind;
  readonly tier: Tier;
  /** Survives the loss of a node: S3 and EBS do, memory and instance disks do not. */
  readonly persistent: boolean;
  readonly instanceType?: string;
  readonly nodeType?: string;
  readonly storageClass?: S3StorageClass;
  /** Fixed node count k (e.g. the paper's measured allocation); sized to fit the data when absent. */
  readonly nodes?: number;
  /** For `tiered`: the memory tier first, then the durable tier. */
  readonly parts?: readonly [Placement, Placement];
}

const shortClass: Record<S3StorageClass, string> = { STANDARD: 'S3', STANDARD_IA: 'S3-IA', GLACIER_IR: 'S3-GlacierIR' };

export function s3Placement(storageClass: S3StorageClass = 'STANDARD'): Placement {
  return { id: `s3:${storageClass}`, label: shortClass[storageClass], kind: 's3', tier: 'cold', persistent: true, storageClass };
}

/** The paper's instance placements: `mem` and `disk` are volatile, `ebs` persistent. */
export function instancePlacement(instanceType: string, store: 'mem' | 'disk' | 'ebs', nodes?: number): Placement {
  const kind = `ec2-${store}` as const;
  return {
    id: `${kind}:${instanceType}${nodes ? `x${nodes}` : ''}`,
    label: `${instanceType}-${store}`,
    kind,
    tier: store === 'mem' ? 'hot' : 'warm',
    persistent: store === 'ebs',
    instanceType,
    ...(nodes ? { nodes } : {}),
  };
}

export function elasticacheServerlessPlacement(): Placement {
  return {
    id: 'elasticache-serverless',
    label: 'elasticache-serverless',
    kind: 'elasticache-serverless',
    tier: 'hot',
    persistent: false,
  };
}

export function elasticacheNodePlacement(nodeType: string, nodes?: number): Placement {
  return {
    id: `elasticache:${nodeType}${nodes ? `x${nodes}` : ''}`,
    label: nodeType,
    kind: 'elasticache-node',
    tier: 'hot',
    persistent: false,
    nodeType,
    ...(nodes ? { nodes } : {}),
  };
}

export function tieredPlacement(hot: Placement, cold: Placement): Placement {
  return {
    id: `${hot.id}+${cold.id}`,
    label: `${hot.label}+${cold.label}`,
    kind: 'tiered',
    tier: 'hot+cold',
    persistent: cold.persistent,
    parts: [hot, cold],
  };
}

/** The placements the recommender weighs for a price book: the paper's seven, or Strata's tiers. */
export function candidatePlacements(book: PriceBook): Placement[] {
  const { prices } = book;
  const instances = Object.keys(prices.ec2.instances);
  const classes = s3StorageClasses.filter((c) => prices.s3.classes[c] !== undefined);
  if (book.placements === 'paper-2010') {
    return [
      ...classes.map((c) => s3Placement(c)),
      ...instances.flatMap((t) => [
        instancePlacement(t, 'mem'),
        ...(prices.ec2.instances[t]?.localDiskGB ? [instancePlacement(t, 'disk')] : []),
        ...(prices.ebs.standard || prices.ebs.gp3 ? [instancePlacement(t, 'ebs')] : []),
      ]),
    ];
  }
  const hot: Placement[] = [
    ...(prices.elasticache?.serverless ? [elasticacheServerlessPlacement()] : []),
    ...Object.keys(prices.elasticache?.nodes ?? {}).map((n) => elasticacheNodePlacement(n)),
  ];
  const warm = prices.ebs.gp3 || prices.ebs.standard ? instances.map((t) => instancePlacement(t, 'ebs')) : [];
  const cold = classes.map((c) => s3Placement(c));
  return [...hot, ...warm, ...cold, ...hot.map((h) => tieredPlacement(h, s3Placement('STANDARD')))];
}
