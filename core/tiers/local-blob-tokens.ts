/**
 * The signed tokens of the local folder tier's `/local-blobs/<token>` URLs (its stand-in for S3 presigned URLs):
 * `<base64url(JSON claims)>.<base64url(HMAC-SHA256)>`, each naming what it allows (`get` a version of a key, `put` an
 * upload's bytes, `part` of a multipart upload) until `exp`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { decodeKey, encodeKey, NAMESPACE_PATTERN } from '../model/keys.js';
import { UPLOADS_FOLDER, validateUploadId } from './storage-key.js';

/** What a valid `/local-blobs/<token>` token allows. */
export type BlobTokenClaims =
  | { op: 'get'; ns: string; key: string; version: number; exp: number }
  | { op: 'put'; uploadId: string; contentType?: string; exp: number }
  | { op: 'part'; uploadId: string; partNumber: number; exp: number };

/** What a token carries: `path` is `<ns>/<encoded key>` or `_uploads/<id>`; `ct` content type, `v` version, `n` part. */
export interface SignedClaims {
  op: 'get' | 'put' | 'part';
  path: string;
  exp: number;
  ct?: string;
  v?: number;
  n?: number;
}

const TOKEN_CONTEXT = 'strata-local-blob:v1:';

export class BlobTokens {
  constructor(
    private readonly secret: Buffer,
    private readonly now: () => number,
  ) {}

  sign(claims: SignedClaims): string {
    const payload = Buffer.from(JSON.stringify(claims), 'utf8').toString('base64url');
    return `${payload}.${this.mac(payload).toString('base64url')}`;
  }

  /** The claims of a token, or null when it is malformed, forged (HMAC compared in constant time) or expired. */
  verify(token: string): BlobTokenClaims | null {
    if (typeof token !== 'string' || token.length > 8192) return null;
    const dot = token.indexOf('.');
    if (dot <= 0 || dot !== token.lastIndexOf('.')) return null;
    const payload = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1), 'base64url');
    const expected = this.mac(payload);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    let claims: { op?: unknown; path?: unknown; exp?: unknown; ct?: unknown; v?: unknown; n?: unknown };
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof claims;
    } catch {
      return null;
    }
    if (typeof claims.exp !== 'number' || claims.exp <= this.now() || typeof claims.path !== 'string') return null;
    const slash = claims.path.indexOf('/');
    if (slash <= 0) return null;
    const head = claims.path.slice(0, slash);
    const rest = claims.path.slice(slash + 1);
    if (claims.op === 'get') {
      if (!NAMESPACE_PATTERN.test(head) || !/^[A-Za-z0-9_-]+$/.test(rest) || !Number.isSafeInteger(claims.v)) return null;
      const key = decodeKey(rest);
      if (encodeKey(key) !== rest) return null;
      return { op: 'get', ns: head, key, version: claims.v as number, exp: claims.exp };
    }
    if (claims.op === 'part') {
      if (head !== UPLOADS_FOLDER || !Number.isInteger(claims.n)) return null;
      try {
        validateUploadId(rest);
      } catch {
        return null;
      }
      return { op: 'part', uploadId: rest, partNumber: claims.n as number, exp: claims.exp };
    }
    if (claims.op === 'put') {
      if (head !== UPLOADS_FOLDER) return null;
      try {
        validateUploadId(rest);
      } catch {
        return null;
      }
      return { op: 'put', uploadId: rest, exp: claims.exp, ...(typeof claims.ct === 'string' ? { contentType: claims.ct } : {}) };
    }
    return null;
  }

  private mac(payload: string): Buffer {
    return createHmac('sha256', this.secret).update(TOKEN_CONTEXT).update(payload).digest();
  }
}
