/**
 * The ElastiCache IAM authentication token (core/composition/elasticache-iam.ts) against the format the
 * documentation gives (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html: a SigV4-presigned
 * `connect` request for the user, with `ResourceType=ServerlessCache` for a serverless cache, signed for service
 * `elasticache`, valid 15 minutes, the scheme removed) and against the AWS SDK's own signer, with fixed credentials
 * and time, so a hand-made signature cannot drift from what ElastiCache verifies.
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import {
  ElastiCacheIamAuth,
  elastiCacheIamToken,
  IAM_REAUTH_AFTER_MS,
  IAM_TOKEN_TTL_SECONDS,
  type AwsCredentials,
} from '../../core/composition/elasticache-iam.js';

const AT = new Date('2024-05-01T12:34:56.789Z');
// A session token with the characters query encoding must get right ('/', '+', '=').
const CREDS: AwsCredentials = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  sessionToken: 'IQoJb3JpZ2luX2Vj/EXAMPLE+token==',
};
const REQUEST = { cacheName: 'strata-prod', userId: 'strata-prod-app', region: 'us-east-1' };

/** The token as the URL it was signed as (auth-iam: the presigned URL with its `http://` removed). */
const parse = (token: string) => new URL(`http://${token}`);

/** node:crypto behind the SDK's Checksum interface (the SDK's own @smithy/hash-node is not installed). */
class Sha256 {
  private readonly h: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    const key = typeof secret === 'string' || secret === undefined ? secret : Buffer.from(secret as ArrayBuffer);
    this.h = key === undefined ? createHash('sha256') : createHmac('sha256', key);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.h.update(typeof data === 'string' ? data : Buffer.from(data as ArrayBuffer));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.h.digest());
  }
  reset(): void {}
}

describe('ElastiCache IAM token', () => {
  it('is the documented connect request for the user, presigned for elasticache in the region, valid 15 minutes', () => {
    const token = elastiCacheIamToken(REQUEST, CREDS, AT);
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html: the host is the cache name, no scheme.
    expect(token.startsWith('strata-prod/?')).toBe(true);
    const url = parse(token);
    expect([url.hostname, url.pathname]).toEqual(['strata-prod', '/']);
    const q = Object.fromEntries(url.searchParams);
    expect(Object.keys(q).sort()).toEqual([
      'Action',
      'ResourceType',
      'User',
      'X-Amz-Algorithm',
      'X-Amz-Credential',
      'X-Amz-Date',
      'X-Amz-Expires',
      'X-Amz-Security-Token',
      'X-Amz-Signature',
      'X-Amz-SignedHeaders',
    ]);
    expect(q).toMatchObject({
      Action: 'connect',
      User: 'strata-prod-app',
      ResourceType: 'ServerlessCache',
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      // Credential scope: key/date/region/service/aws4_request
      // (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html)
      'X-Amz-Credential': 'AKIDEXAMPLE/20240501/us-east-1/elasticache/aws4_request',
      'X-Amz-Date': '20240501T123456Z',
      'X-Amz-Expires': '900',
      'X-Amz-Security-Token': CREDS.sessionToken,
      'X-Amz-SignedHeaders': 'host',
    });
    expect(q['X-Amz-Signature']).toMatch(/^[0-9a-f]{64}$/);
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html (Limitations): valid for 15 minutes.
    expect(IAM_TOKEN_TTL_SECONDS).toBe(15 * 60);
  });

  it('is signed exactly as the AWS SDK signer presigns the same request', async () => {
    const signer = new SignatureV4({ credentials: CREDS, region: 'us-east-1', service: 'elasticache', sha256: Sha256 });
    const signed = await signer.presign(
      {
        method: 'GET',
        protocol: 'http:',
        hostname: 'strata-prod',
        path: '/',
        headers: { host: 'strata-prod' },
        query: { Action: 'connect', User: 'strata-prod-app', ResourceType: 'ServerlessCache' },
      },
      { expiresIn: IAM_TOKEN_TTL_SECONDS, signingDate: AT },
    );
    const ours = parse(elastiCacheIamToken(REQUEST, CREDS, AT));
    expect(Object.fromEntries(ours.searchParams)).toEqual(signed.query);
    // Different time, credentials or user: a different signature.
    const other = (t: string) => parse(t).searchParams.get('X-Amz-Signature');
    const base = other(elastiCacheIamToken(REQUEST, CREDS, AT));
    expect(other(elastiCacheIamToken(REQUEST, CREDS, new Date(AT.getTime() + 1000)))).not.toBe(base);
    expect(other(elastiCacheIamToken(REQUEST, { ...CREDS, secretAccessKey: 'x' }, AT))).not.toBe(base);
    expect(other(elastiCacheIamToken({ ...REQUEST, userId: 'strata-prod-other' }, CREDS, AT))).not.toBe(base);
  });

  it('leaves out the session token for long-term keys and ResourceType for a replication group', () => {
    const q = parse(
      elastiCacheIamToken({ ...REQUEST, serverless: false }, { accessKeyId: 'AKID', secretAccessKey: 's' }, AT),
    ).searchParams;
    expect(q.has('X-Amz-Security-Token')).toBe(false);
    expect(q.has('ResourceType')).toBe(false);
  });

  it('signs for the lower-case names ElastiCache stores', () => {
    const url = parse(elastiCacheIamToken({ ...REQUEST, cacheName: 'Strata-Prod', userId: 'Strata-Prod-App' }, CREDS, AT));
    expect([url.hostname, url.searchParams.get('User')]).toEqual(['strata-prod', 'strata-prod-app']);
  });
});

describe('ElastiCacheIamAuth', () => {
  it('resolves credentials before the first connection and signs a token for every connection at its own time', async () => {
    let now = AT.getTime();
    let resolved = 0;
    const auth = new ElastiCacheIamAuth(REQUEST, { credentials: async () => (resolved++, CREDS), now: () => now });
    await auth.prepare();
    await auth.prepare();
    expect(resolved).toBe(1);
    const first = auth.password();
    expect(first).toBe(elastiCacheIamToken(REQUEST, CREDS, AT));
    now += 60_000;
    expect(auth.password()).toBe(elastiCacheIamToken(REQUEST, CREDS, new Date(now)));
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html (Limitations): connections are closed after
    // 12 hours unless re-authenticated; the tier re-authenticates before.
    expect(auth.reauthenticateAfterMs).toBe(IAM_REAUTH_AFTER_MS);
    expect(IAM_REAUTH_AFTER_MS).toBeLessThan(12 * 3600_000);
  });

  it('refreshes temporary credentials near their expiry without holding up a connection', async () => {
    const now = AT.getTime();
    const expiring = { ...CREDS, accessKeyId: 'OLD', expiration: new Date(now + 60_000) };
    const fresh = { ...CREDS, accessKeyId: 'NEW', expiration: new Date(now + 3600_000) };
    const served = [expiring, fresh];
    const auth = new ElastiCacheIamAuth(REQUEST, { credentials: async () => served.shift()!, now: () => now });
    await auth.prepare();
    // Still valid for a minute: used now, and a refresh starts.
    expect(parse(auth.password()).searchParams.get('X-Amz-Credential')).toMatch(/^OLD\//);
    await auth.prepare();
    expect(parse(auth.password()).searchParams.get('X-Amz-Credential')).toMatch(/^NEW\//);
  });

  it('gives a connection opened before the credentials are known a password that fails its AUTH, not an exception', async () => {
    const auth = new ElastiCacheIamAuth(REQUEST, { credentials: async () => CREDS });
    expect(() => auth.password()).not.toThrow();
    await auth.prepare();
    expect(parse(auth.password()).searchParams.get('Action')).toBe('connect');
  });
});
