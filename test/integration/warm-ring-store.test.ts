import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { addNode, initialRing } from '../../core/ring/document.js';
import { CasConflictError, CasStoreUnavailableError, RingStore, S3CasStore } from '../../core/ring/store.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';

describe('ring document in S3 (LocalStack conditional writes)', () => {
  const bucket = uniqueName('strata-ring').toLowerCase();
  let s3: S3Client;
  let cas: S3CasStore;

  beforeAll(async () => {
    s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    cas = new S3CasStore({ bucket, prefix: 'strata/ring', client: s3 });
  });

  afterAll(async () => {
    const list = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
    const keys = (list.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length) await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
    await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
    s3.destroy();
  });

  it('creates with If-None-Match and replaces only with the etag it read (If-Match)', async () => {
    await expect(cas.get('doc')).resolves.toBeUndefined();
    const e1 = await cas.put('doc', '{"v":1}', null);
    await expect(cas.put('doc', '{"v":1}', null)).rejects.toBeInstanceOf(CasConflictError);
    const e2 = await cas.put('doc', '{"v":2}', e1);
    await expect(cas.put('doc', '{"v":3}', e1)).rejects.toBeInstanceOf(CasConflictError);
    await expect(cas.get('doc')).resolves.toEqual({ body: '{"v":2}', etag: e2 });
  });

  it('serialises concurrent ring edits: every edit lands exactly once, versions are consecutive', async () => {
    const store = new RingStore(cas);
    await store.create(initialRing([{ id: 'a', url: 'http://a:1' }], 1));
    const added = ['b', 'c', 'd', 'e', 'f'];
    const results = await Promise.all(
      added.map((id) => new RingStore(cas).update((d) => addNode(d, { id, url: `http://${id}:1` }))),
    );
    const final = (await store.load())!;
    expect(final.version).toBe(1 + added.length);
    expect(final.nodes.map((n) => n.id).sort()).toEqual(['a', ...added]);
    expect(results.map((r) => r.version).sort()).toEqual([2, 3, 4, 5, 6]);
  });

  it('reports an unreachable store as unavailable, not as a conflict', async () => {
    const dead = new S3CasStore({
      bucket,
      clientConfig: {
        endpoint: 'http://127.0.0.1:1',
        region: 'us-east-1',
        credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
        maxAttempts: 1,
      },
    });
    await expect(dead.get('doc')).rejects.toBeInstanceOf(CasStoreUnavailableError);
    await expect(dead.put('doc', '{}', null)).rejects.toBeInstanceOf(CasStoreUnavailableError);
    dead.close();
  });
});
