import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ValidationError } from '../errors.js';
import { isConflict, isNotFound } from './s3-errors.js';
import { s3SweepRequestKey, SWEEP_NAME_PATTERN, SWEEP_REQUEST_SUFFIX, SWEEPS_FOLDER } from './storage-key.js';
import type { SweepRequests } from './tier.js';

export interface S3SweepRequestDeps {
  client: S3Client;
  bucket: string;
  prefix: string;
  /** The tier's TierUnavailableError for a failed request. */
  unavailable(e: unknown): Error;
}

/**
 * The S3 tier's sweep requests (tier.ts, SweepRequests): `<prefix>/_sweeps/<name>.sweep`, a small JSON object whose
 * creation S3 sends to EventBridge, where the Workflows stack's rule starts the invalidation-sweep workflow with its
 * key. Created with `If-None-Match: *`, so that the invalidations sharing a sweep (a namespace's tag invalidations
 * of one window) create it once, and start one execution: S3 answers 412 to the others
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
 */
export class S3SweepRequests implements SweepRequests {
  constructor(private readonly d: S3SweepRequestDeps) {}

  async requestSweep(name: string, input: Record<string, unknown>): Promise<boolean> {
    try {
      await this.d.client.send(
        new PutObjectCommand({
          Bucket: this.d.bucket,
          Key: s3SweepRequestKey(this.d.prefix, name),
          Body: JSON.stringify(input),
          ContentType: 'application/json',
          IfNoneMatch: '*',
        }),
      );
      return true;
    } catch (e) {
      if (isConflict(e)) return false;
      throw this.d.unavailable(e);
    }
  }

  async readSweepRequest(object: string): Promise<Record<string, unknown> | undefined> {
    let body: string;
    try {
      const res = await this.d.client.send(new GetObjectCommand({ Bucket: this.d.bucket, Key: this.own(object) }));
      body = (await res.Body?.transformToString()) ?? '';
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw this.d.unavailable(e);
    }
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new ValidationError('object', `the sweep request ${object} does not hold a JSON object`);
    return parsed as Record<string, unknown>;
  }

  async deleteSweepRequest(object: string): Promise<void> {
    try {
      await this.d.client.send(new DeleteObjectCommand({ Bucket: this.d.bucket, Key: this.own(object) }));
    } catch (e) {
      throw this.d.unavailable(e);
    }
  }

  /** `object` when it names one of this tier's sweep requests: a step reads no other object on an input's word. */
  private own(object: string): string {
    const folder = `${this.d.prefix === '' ? '' : `${this.d.prefix}/`}${SWEEPS_FOLDER}/`;
    const name =
      object.startsWith(folder) && object.endsWith(SWEEP_REQUEST_SUFFIX)
        ? object.slice(folder.length, -SWEEP_REQUEST_SUFFIX.length)
        : '';
    if (!SWEEP_NAME_PATTERN.test(name))
      throw new ValidationError('object', `'${object.slice(0, 200)}' is not a sweep request of this tier (${folder}*.sweep)`);
    return object;
  }
}
