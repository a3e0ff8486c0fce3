import { GetMetricDataCommand, type CloudWatchClient, type MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import { paginateDescribeInstances, paginateDescribeVolumes, type EC2Client, type Filter } from '@aws-sdk/client-ec2';
import { paginateListObjectsV2, type S3Client } from '@aws-sdk/client-s3';
import type { FleetReader, MetricQuery, MetricSource, MetricValue, ObjectListing, ObjectStoreReader } from './usage-reader.js';
import type { FleetVolume, TimeWindow } from '../model/usage.js';
import type { NodeLifecycle } from '../model/spot.js';
import type { FleetNodeInstance } from './usage-reader.js';
import { CAPACITY_TAG } from '../../nodes/ec2-fleet.js';

/** The usage readers of usage-reader.ts over the AWS SDK (EC2, S3, CloudWatch). */

/** GetMetricData takes at most 500 queries per call. */
const MAX_QUERIES_PER_CALL = 500;

export { CAPACITY_TAG };

/**
 * How an instance was bought: EC2's own word first (DescribeInstances' `InstanceLifecycle` is `spot` for a Spot
 * Instance, absent for On-Demand), else the launch's {@link CAPACITY_TAG} (for an EC2 API that does not report the
 * lifecycle, such as LocalStack's).
 */
export function instanceLifecycle(i: {
  readonly InstanceLifecycle?: string;
  readonly Tags?: readonly { readonly Key?: string; readonly Value?: string }[];
}): NodeLifecycle {
  if (i.InstanceLifecycle !== undefined) return i.InstanceLifecycle === 'spot' ? 'spot' : 'on-demand';
  return i.Tags?.find((t) => t.Key === CAPACITY_TAG)?.Value === 'spot' ? 'spot' : 'on-demand';
}

/** Instances and volumes carrying every one of `tags` (DescribeInstances / DescribeVolumes, all pages). */
export class Ec2FleetReader implements FleetReader {
  private readonly filters: Filter[];

  constructor(
    private readonly client: EC2Client,
    tags: Readonly<Record<string, string>>,
  ) {
    this.filters = Object.entries(tags).map(([k, v]) => ({ Name: `tag:${k}`, Values: [v] }));
  }

  async instances(): Promise<FleetNodeInstance[]> {
    const out: FleetNodeInstance[] = [];
    const filters = [
      ...this.filters,
      { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped', 'shutting-down'] },
    ];
    for await (const page of paginateDescribeInstances({ client: this.client }, { Filters: filters })) {
      for (const r of page.Reservations ?? []) {
        for (const i of r.Instances ?? [])
          out.push({
            id: i.InstanceId ?? '?',
            type: String(i.InstanceType ?? '?'),
            state: String(i.State?.Name ?? 'unknown'),
            lifecycle: instanceLifecycle(i),
          });
      }
    }
    return out;
  }

  async volumes(): Promise<FleetVolume[]> {
    const out: FleetVolume[] = [];
    for await (const page of paginateDescribeVolumes({ client: this.client }, { Filters: this.filters })) {
      for (const v of page.Volumes ?? []) {
        if (v.State === 'deleted' || v.State === 'deleting') continue;
        const type = String(v.VolumeType ?? 'unknown');
        out.push({
          id: v.VolumeId ?? '?',
          type,
          sizeGiB: v.Size ?? 0,
          // gp3 volumes created without explicit performance get the baseline; a mock may leave the fields out.
          iops: v.Iops ?? (type === 'gp3' ? 3000 : 0),
          throughputMiBps: v.Throughput ?? (type === 'gp3' ? 125 : 0),
        });
      }
    }
    return out;
  }
}

/** Sums object sizes under `<prefix>/` with ListObjectsV2 (1,000 keys a page), stopping at `maxObjects`. */
export class S3ListingReader implements ObjectStoreReader {
  constructor(private readonly client: S3Client) {}

  async list(bucket: string, prefix: string, maxObjects: number): Promise<ObjectListing> {
    let bytes = 0;
    let objects = 0;
    const Prefix = prefix === '' ? undefined : `${prefix.replace(/\/+$/, '')}/`;
    for await (const page of paginateListObjectsV2(
      { client: this.client, pageSize: 1000 },
      { Bucket: bucket, ...(Prefix ? { Prefix } : {}) },
    )) {
      for (const o of page.Contents ?? []) {
        bytes += o.Size ?? 0;
        objects++;
      }
      if (objects >= maxObjects && page.IsTruncated) return { bytes, objects, truncated: true };
    }
    return { bytes, objects, truncated: false };
  }
}

/** GetMetricData, 500 queries a call, following NextToken. */
export class CloudWatchMetricSource implements MetricSource {
  constructor(private readonly client: CloudWatchClient) {}

  async query(queries: readonly MetricQuery[], range: TimeWindow): Promise<ReadonlyMap<string, readonly MetricValue[]>> {
    const out = new Map<string, MetricValue[]>();
    for (let i = 0; i < queries.length; i += MAX_QUERIES_PER_CALL) {
      const batch: MetricDataQuery[] = queries.slice(i, i + MAX_QUERIES_PER_CALL).map((q) => ({
        Id: q.id,
        ReturnData: true,
        MetricStat: {
          Metric: {
            Namespace: q.namespace,
            MetricName: q.metricName,
            Dimensions: Object.entries(q.dimensions).map(([Name, Value]) => ({ Name, Value })),
          },
          Period: q.periodSeconds,
          Stat: q.stat,
        },
      }));
      let token: string | undefined;
      do {
        const res = await this.client.send(
          new GetMetricDataCommand({
            MetricDataQueries: batch,
            StartTime: range.start,
            EndTime: range.end,
            ScanBy: 'TimestampAscending',
            ...(token ? { NextToken: token } : {}),
          }),
        );
        for (const r of res.MetricDataResults ?? []) {
          if (!r.Id) continue;
          const list = out.get(r.Id) ?? [];
          (r.Timestamps ?? []).forEach((t, j) => {
            const v = r.Values?.[j];
            if (v !== undefined) list.push({ timestamp: new Date(t), value: v });
          });
          out.set(r.Id, list);
        }
        token = res.NextToken;
      } while (token);
    }
    return out;
  }
}
