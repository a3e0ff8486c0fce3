import { ValidationError } from '../../errors.js';
import type { PriceBook } from './price-catalog.js';
import {
  allocationCost,
  addBreakdowns,
  breakdown,
  requestCost,
  storageCost,
  transferCost,
  type CostBreakdown,
} from './formulas.js';
import { DEFAULT_LATENCY, LATENCY_2010, gbpsToMBps, transferTimeSec, type LatencyModel } from './performance.js';
import type { Placement } from './placements.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
/** Largest single I/O gp3 counts as one operation. */
const GP3_IO_BYTES = 256 * 1024;
/** Valkey's largest value (proto-max-bulk-len). */
const VALKEY_MAX_VALUE_BYTES = 512 * MiB;
/** Strata's default `writeAroundBytes`: values this large skip the hot tier unless a policy says otherwise. */
const STRATA_WRITE_AROUND_BYTES = MiB;

/** What a month of cache use looks like to the cost formulas. */
export interface Usage {
  /** d: size of one cached value, in bytes. */
  readonly valueBytes: number;
  /** Distinct keys held; T = keys · d. */
  readonly keys: number;
  /** R: cache reads a month, each returning d bytes. */
  readonly readsPerMonth: number;
  /** Values written a month (misses filling the cache, updates). Paper 001's tables count none. */
  readonly writesPerMonth: number;
}

export interface CostOptions {
  /** `internet` (the paper's assumption, C_IO charged on every read) or `in-region` (no C_IO). @default 'internet' */
  readonly transferOut?: 'internet' | 'in-region';
  /** Add Strata's front door (API Gateway REST + coordinator Lambda) per request. @default true when the book prices both and describes Strata */
  readonly accessPath?: boolean;
  /** @default 1024 */
  readonly lambdaMemoryMB?: number;
  /** Coordinator time per request besides waiting on the tier. @default 15 */
  readonly lambdaOverheadMs?: number;
  /** Values above this travel through presigned S3 URLs, so the Lambda does not wait on the transfer. @default 4 MiB */
  readonly inlineLimitBytes?: number;
  /** Share of an instance's memory that holds data (or page cache) in memory and EBS placements. @default 0.75 */
  readonly memoryUsableFraction?: number;
  /** ElastiCache reserved-memory share (not available for data). @default 0.25 */
  readonly elasticacheReservedFraction?: number;
  /** Spare room on EBS volumes. @default 0 for the paper's catalog (it sizes volumes at T), 0.25 otherwise */
  readonly ebsHeadroom?: number;
  /** I/O requests per cache request on magnetic EBS (the paper charges one). @default 1 */
  readonly ebsIoPerRequest?: number;
  /** Peak over average request rate, for provisioning gp3 IOPS and throughput. @default 10 */
  readonly peakToAverage?: number;
  /** @default LATENCY_2010 for the paper's catalog, DEFAULT_LATENCY otherwise */
  readonly latency?: Partial<LatencyModel>;
}

export interface PlacementCost {
  readonly placement: Placement;
  /** k: instances or cache nodes allocated (0 for S3 and Serverless). */
  readonly nodes: number;
  /** T in billed GB. */
  readonly storedGB: number;
  readonly cost: CostBreakdown;
  /** Estimated time to serve one hit, and the extra time a miss spends storing its result. */
  readonly hitTimeSec: number;
  readonly fillTimeSec: number;
  /** False when the placement cannot hold these values at all (e.g. over Valkey's value size limit). */
  readonly feasible: boolean;
  readonly notes: readonly string[];
}

interface Resolved {
  readonly book: PriceBook;
  readonly usage: Usage;
  readonly o: Required<Omit<CostOptions, 'latency'>> & { latency: LatencyModel };
  readonly dGB: number;
  readonly totalBytes: number;
}

function resolveOptions(book: PriceBook, options: CostOptions): Resolved['o'] {
  const p = book.prices;
  return {
    transferOut: options.transferOut ?? 'internet',
    accessPath: options.accessPath ?? (book.placements === 'strata' && p.lambda !== undefined && p.apiGateway !== undefined),
    lambdaMemoryMB: options.lambdaMemoryMB ?? 1024,
    lambdaOverheadMs: options.lambdaOverheadMs ?? 15,
    inlineLimitBytes: options.inlineLimitBytes ?? 4 * MiB,
    memoryUsableFraction: options.memoryUsableFraction ?? 0.75,
    elasticacheReservedFraction: options.elasticacheReservedFraction ?? 0.25,
    ebsHeadroom: options.ebsHeadroom ?? (book.placements === 'paper-2010' ? 0 : 0.25),
    ebsIoPerRequest: options.ebsIoPerRequest ?? 1,
    peakToAverage: options.peakToAverage ?? 10,
    latency: { ...(book.placements === 'paper-2010' ? LATENCY_2010 : DEFAULT_LATENCY), ...options.latency },
  };
}

/**
 * Monthly cost of one placement for a usage, with the paper's components, plus estimated hit and fill times.
 * @example costPlacement(s3Placement(), { valueBytes: 1e6, keys: 500, readsPerMonth: 2000, writesPerMonth: 0 }, priceBook('paper-2010')).cost.total // 0.377
 */
export function costPlacement(placement: Placement, usage: Usage, book: PriceBook, options: CostOptions = {}): PlacementCost {
  for (const [field, v] of Object.entries(usage)) {
    if (!Number.isFinite(v) || v < 0) throw new ValidationError(field, `must be a finite number >= 0, got ${v}`);
  }
  const r: Resolved = {
    book,
    usage,
    o: resolveOptions(book, options),
    dGB: usage.valueBytes / book.bytesPerGB,
    totalBytes: usage.keys * usage.valueBytes,
  };
  const base = placement.kind === 'tiered' ? costTiered(placement, r) : costSingle(placement, r);
  const access = accessCost(r, base.hitTimeSec, base.fillTimeSec);
  const io =
    r.o.transferOut === 'internet' ? transferCost(usage.readsPerMonth, r.dGB, book.prices.dataTransfer.outToInternetPerGB) : 0;
  return { ...base, placement, cost: addBreakdowns(base.cost, breakdown({ io, access })) };
}

type TierCost = Omit<PlacementCost, 'placement'>;

function costTiered(placement: Placement, r: Resolved): TierCost {
  const [hotP, coldP] = placement.parts ?? [];
  if (!hotP || !coldP) throw new ValidationError('placement', `tiered placement ${placement.id} needs two parts`);
  // Reads are served by the memory tier; the durable tier only takes the writes (write-through).
  const hot = costSingle(hotP, r);
  const cold = costSingle(coldP, { ...r, usage: { ...r.usage, readsPerMonth: 0 } });
  return {
    nodes: hot.nodes,
    storedGB: hot.storedGB,
    cost: addBreakdowns(hot.cost, cold.cost),
    hitTimeSec: hot.hitTimeSec,
    fillTimeSec: Math.max(hot.fillTimeSec, cold.fillTimeSec),
    feasible: hot.feasible && cold.feasible,
    notes: [...hot.notes, ...cold.notes],
  };
}

function costSingle(placement: Placement, r: Resolved): TierCost {
  switch (placement.kind) {
    case 's3':
      return costS3(placement, r);
    case 'ec2-mem':
    case 'ec2-disk':
    case 'ec2-ebs':
      return costInstance(placement, r);
    case 'elasticache-serverless':
      return costServerless(r);
    case 'elasticache-node':
      return costCacheNodes(placement, r);
    case 'tiered':
      throw new ValidationError('placement', `tiered placement ${placement.id} cannot be nested`);
  }
}

/** S3: C = C_S + C_R + C_IO. */
function costS3(placement: Placement, r: Resolved): TierCost {
  const { usage, book, o } = r;
  const cls = book.prices.s3.classes[placement.storageClass ?? 'STANDARD'];
  if (!cls)
    throw new ValidationError(
      'placement',
      `catalog ${book.catalogId} has no S3 ${placement.storageClass} prices in ${book.region}`,
    );
  const billedBytes = Math.max(usage.valueBytes, cls.minBillableObjectBytes);
  const storedGB = (usage.keys * billedBytes) / book.bytesPerGB;
  const req =
    requestCost(usage.writesPerMonth, cls.put) +
    requestCost(usage.readsPerMonth, cls.get) +
    usage.readsPerMonth * r.dGB * cls.retrievalPerGB;
  const t = transferTimeSec(usage.valueBytes, o.latency.s3FirstByteMs, o.latency.s3StreamMBps);
  const notes: string[] = [];
  if (cls.minBillableObjectBytes > usage.valueBytes)
    notes.push(`${placement.label} bills each object as at least ${cls.minBillableObjectBytes / 1024} KiB`);
  if (cls.minStorageDays > 0) notes.push(`${placement.label} bills at least ${cls.minStorageDays} days per object`);
  return {
    nodes: 0,
    storedGB,
    cost: breakdown({ store: storageCost(storedGB, cls.perGBMonth), req }),
    hitTimeSec: t,
    fillTimeSec: t,
    feasible: true,
    notes,
  };
}

/** EC2 placements: memory and instance disk are volatile (C = C_Alloc + C_IO); EBS adds C_S + C_R. */
function costInstance(placement: Placement, r: Resolved): TierCost {
  const { usage, book, o } = r;
  const type = placement.instanceType ?? '';
  const inst = book.prices.ec2.instances[type];
  if (!inst) throw new ValidationError('placement', `catalog ${book.catalogId} has no EC2 ${type} in ${book.region}`);
  const memBytes = inst.memoryGiB * GiB * o.memoryUsableFraction;
  const netMBps = gbpsToMBps(inst.networkGbps);
  const hours = book.hoursPerMonth;
  const notes: string[] = [];
  let nodes: number;
  let store = 0;
  let req = 0;
  let diskPath: { firstByteMs: number; MBps: number };

  if (placement.kind === 'ec2-mem') {
    nodes = placement.nodes ?? Math.max(1, Math.ceil(r.totalBytes / memBytes));
    diskPath = { firstByteMs: 0, MBps: netMBps };
  } else if (placement.kind === 'ec2-disk') {
    if (!inst.localDiskGB) throw new ValidationError('placement', `${type} has no instance-store disk`);
    nodes = placement.nodes ?? Math.max(1, Math.ceil(r.totalBytes / (inst.localDiskGB * book.bytesPerGB)));
    diskPath = { firstByteMs: o.latency.localDiskFirstByteMs, MBps: o.latency.localDiskMBps };
  } else {
    const { gp3, standard } = book.prices.ebs;
    const maxSizeGB = gp3?.maxSizeGB ?? standard?.maxSizeGB;
    if (maxSizeGB === undefined)
      throw new ValidationError('placement', `catalog ${book.catalogId} has no EBS prices in ${book.region}`);
    const wantGB = (r.totalBytes * (1 + o.ebsHeadroom)) / book.bytesPerGB;
    nodes = placement.nodes ?? Math.max(1, Math.ceil(wantGB / maxSizeGB));
    const volumeGB = Math.max(gp3?.minSizeGB ?? 0, wantGB / nodes);
    if (gp3) {
      store = nodes * storageCost(volumeGB, gp3.perGBMonth);
      // gp3 has no per-I/O charge; pay only for IOPS and throughput above the free baseline at peak.
      const peakPerNode = ((usage.readsPerMonth + usage.writesPerMonth) / nodes / (hours * 3600)) * o.peakToAverage;
      const iops = peakPerNode * Math.max(1, Math.ceil(usage.valueBytes / GP3_IO_BYTES));
      const wantMBps = (peakPerNode * usage.valueBytes) / MiB;
      const MBps = Math.min(gp3.maxThroughputMBps, Math.max(gp3.baselineThroughputMBps, wantMBps));
      if (wantMBps > gp3.maxThroughputMBps)
        notes.push(`peak throughput ${Math.round(wantMBps)} MiB/s per node exceeds gp3's ${gp3.maxThroughputMBps}; add nodes`);
      req =
        nodes *
        (Math.max(0, iops - gp3.baselineIops) * gp3.perIopsMonth + (MBps - gp3.baselineThroughputMBps) * gp3.perMBpsMonth);
      diskPath = { firstByteMs: o.latency.gp3FirstByteMs, MBps };
    } else if (standard) {
      store = nodes * storageCost(volumeGB, standard.perGBMonth);
      req = requestCost((usage.readsPerMonth + usage.writesPerMonth) * o.ebsIoPerRequest, standard.io);
      diskPath = { firstByteMs: o.latency.ebsStandardFirstByteMs, MBps: o.latency.ebsStandardMBps };
    } else {
      throw new ValidationError('placement', `catalog ${book.catalogId} has no EBS prices in ${book.region}`);
    }
  }
  // Data that fits in memory is served from it (page cache for disk and EBS), as the paper observed for 1 KB.
  const inMemory = placement.kind === 'ec2-mem' || r.totalBytes / nodes <= memBytes;
  const t = inMemory
    ? transferTimeSec(usage.valueBytes, o.latency.networkRttMs, netMBps)
    : transferTimeSec(usage.valueBytes, o.latency.networkRttMs + diskPath.firstByteMs, netMBps, diskPath.MBps);
  if (placement.kind === 'ec2-mem' && r.totalBytes / nodes > memBytes)
    notes.push(`${nodes} x ${type} hold only ${fmtGB((nodes * memBytes) / book.bytesPerGB)} GB in memory`);
  return {
    nodes,
    storedGB: r.totalBytes / book.bytesPerGB,
    cost: breakdown({ alloc: allocationCost(hours, nodes, inst.hourly), store, req }),
    hitTimeSec: t,
    fillTimeSec: t,
    feasible: true,
    notes,
  };
}

/** ElastiCache Serverless: GB-hours stored (with the minimum) plus ECPUs (1 per KiB moved). */
function costServerless(r: Resolved): TierCost {
  const { usage, book, o } = r;
  const sl = book.prices.elasticache?.serverless;
  if (!sl)
    throw new ValidationError('placement', `catalog ${book.catalogId} has no ElastiCache Serverless prices in ${book.region}`);
  const storedGB = r.totalBytes / book.bytesPerGB;
  const ecpuPerRequest = Math.max(1, usage.valueBytes / 1024);
  const store = storageCost(Math.max(storedGB, sl.minGB), sl.perGBHour * book.hoursPerMonth);
  const req = requestCost((usage.readsPerMonth + usage.writesPerMonth) * ecpuPerRequest, sl.ecpu);
  const t = transferTimeSec(usage.valueBytes, o.latency.networkRttMs, o.latency.elasticacheServerlessMBps);
  return { nodes: 0, storedGB, cost: breakdown({ store, req }), hitTimeSec: t, fillTimeSec: t, ...hotTierLimits(usage) };
}

/** ElastiCache nodes: C_Alloc for enough nodes to hold T in the memory not reserved. */
function costCacheNodes(placement: Placement, r: Resolved): TierCost {
  const { usage, book, o } = r;
  const type = placement.nodeType ?? '';
  const node = book.prices.elasticache?.nodes[type];
  if (!node) throw new ValidationError('placement', `catalog ${book.catalogId} has no ElastiCache ${type} in ${book.region}`);
  const capacity = node.memoryGiB * GiB * (1 - o.elasticacheReservedFraction);
  const nodes = placement.nodes ?? Math.max(1, Math.ceil(r.totalBytes / capacity));
  const t = transferTimeSec(usage.valueBytes, o.latency.networkRttMs, gbpsToMBps(node.networkGbps));
  const limits = hotTierLimits(usage);
  return {
    nodes,
    storedGB: r.totalBytes / book.bytesPerGB,
    cost: breakdown({ alloc: allocationCost(book.hoursPerMonth, nodes, node.hourly) }),
    hitTimeSec: t,
    fillTimeSec: t,
    feasible: limits.feasible,
    notes: [...limits.notes, 'no replica: losing a node loses its hot copy'],
  };
}

function hotTierLimits(usage: Usage): { feasible: boolean; notes: string[] } {
  if (usage.valueBytes > VALKEY_MAX_VALUE_BYTES) return { feasible: false, notes: ['values over 512 MiB do not fit in Valkey'] };
  if (usage.valueBytes >= STRATA_WRITE_AROUND_BYTES)
    return { feasible: true, notes: ['needs writeAroundBytes raised above the value size (default 1 MiB skips the hot tier)'] };
  return { feasible: true, notes: [] };
}

/** Strata's front door: one API Gateway request and one coordinator Lambda invocation per cache request. */
function accessCost(r: Resolved, hitTimeSec: number, fillTimeSec: number): number {
  const { o, usage, book } = r;
  const { lambda, apiGateway } = book.prices;
  if (!o.accessPath || !lambda || !apiGateway) return 0;
  const requests = usage.readsPerMonth + usage.writesPerMonth;
  const inline = usage.valueBytes <= o.inlineLimitBytes;
  const overhead = o.lambdaOverheadMs / 1000;
  const seconds =
    usage.readsPerMonth * (overhead + (inline ? hitTimeSec : 0)) + usage.writesPerMonth * (overhead + (inline ? fillTimeSec : 0));
  return (
    requestCost(requests, apiGateway.restRequests) +
    requestCost(requests, lambda.requests) +
    seconds * (o.lambdaMemoryMB / 1024) * lambda.perGBSecondArm64
  );
}

function fmtGB(gb: number): string {
  return String(Number(gb.toFixed(2)));
}
