/**
 * The three real tiers, for suites that need them together: redis-server as hot (a key prefix of its own), one
 * cache-node process as warm (a one-node ring), and LocalStack S3 or the local folder tier as cold. `atRest()` reads
 * what each tier holds beside the tier's own API (raw Redis values, the node's files, S3 objects or files).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Redis } from 'ioredis';
import { LocalFleet } from '../../core/nodes/local-fleet.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { initialRing } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { RedisTier } from '../../core/tiers/redis/redis-tier.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import type { Coordinator } from '../../core/coordinator/coordinator.js';
import type { Tier } from '../../core/tiers/tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { removeBucket, testRedisUrl, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { SECRET, tempDir } from './warm-fixtures.js';

export type ColdKind = 's3' | 'folder';

export interface TierStack {
  hot: RedisTier;
  warm: WarmTier;
  cold: Tier;
  /** Everything each tier holds at rest, read beside the tier. */
  atRest(): Promise<Record<'hot' | 'warm' | 'cold', Buffer>>;
  close(): Promise<void>;
}

/**
 * Closes coordinators that share one stack's tiers. Each one's close() closes the tiers it was given, so closed
 * together the first to finish destroyed the S3 client under the other's writes still in flight. Those requests
 * (already sent) landed in the bucket after it was emptied, and deleting it failed with BucketNotEmpty. So all of
 * them finish their background work and flush what they hold dirty before any closes.
 */
export async function closeSharingTiers(...coordinators: (Coordinator | undefined)[]): Promise<void> {
  const open = coordinators.filter((c): c is Coordinator => c !== undefined);
  await Promise.allSettled(open.map((c) => c.drain()));
  for (const c of open) while ((await c.flushDirty().catch(() => 0)) > 0);
  await Promise.allSettled(open.map((c) => c.drain()));
  for (const c of open) await c.close().catch(() => {});
}

/** Every file under `dir`, concatenated. */
export function filesUnder(dir: string): Buffer {
  const parts: Buffer[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else parts.push(readFileSync(p));
    }
  };
  walk(dir);
  return Buffer.concat(parts);
}

export async function startTierStack(coldKind: ColdKind): Promise<TierStack> {
  const prefix = uniqueName('stack');
  const nodeRoot = tempDir('strata-stack-fleet-');
  const folder = tempDir('strata-stack-cold-');
  const bucket = uniqueName('strata-stack').toLowerCase();
  const fleet = new LocalFleet({ rootDir: nodeRoot.dir, secret: SECRET });
  const nodes = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  const redis = new Redis(testRedisUrl());
  const hot = new RedisTier({ url: testRedisUrl(), keyPrefix: prefix });
  const node = await fleet.launch('s1');
  const store = new RingStore(new InMemoryCasStore());
  const ring = await store.create(initialRing([{ id: node.nodeId, url: node.url }], 1));
  await nodes.pushRing(node.url, ring);
  const warm = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), client: nodes });
  let s3: S3Client | undefined;
  let cold: Tier;
  if (coldKind === 's3') {
    s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    cold = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
  } else {
    cold = new LocalFolderTier({ dir: folder.dir, fsync: false });
  }
  const s3Bodies = async (): Promise<Buffer> => {
    const list = await s3!.send(new ListObjectsV2Command({ Bucket: bucket }));
    const bodies = await Promise.all(
      (list.Contents ?? []).map(async (o) => {
        const r = await s3!.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key! }));
        return Buffer.from(await r.Body!.transformToByteArray());
      }),
    );
    return Buffer.concat(bodies);
  };
  return {
    hot,
    warm,
    cold,
    atRest: async () => {
      const raw: Buffer[] = [];
      for (const k of await redis.keys(`${prefix}*`)) {
        const type = await redis.type(k);
        if (type === 'string') raw.push((await redis.getBuffer(k))!);
        if (type === 'hash') raw.push(...Object.values(await redis.hgetallBuffer(k)));
      }
      return { hot: Buffer.concat(raw), warm: filesUnder(nodeRoot.dir), cold: s3 ? await s3Bodies() : filesUnder(folder.dir) };
    },
    close: async () => {
      await Promise.allSettled([hot.close(), warm.close(), cold.close()]);
      await nodes.close();
      await fleet.close();
      if (s3) {
        await removeBucket(s3, bucket);
        s3.destroy();
      }
      const leftovers = await redis.keys(`${prefix}*`);
      if (leftovers.length) await redis.del(...leftovers);
      redis.disconnect();
      nodeRoot.remove();
      folder.remove();
    },
  };
}
