/**
 * The local folder tier's presigned uploads (its Presigning and MultipartPresigning capabilities, which
 * LocalFolderTier delegates here): the upload record next to each staged upload (`_uploads/<id>.json`), the signed
 * PUT token that stages the bytes (or the parts, local-uploads.ts), the claim a completion takes, and the commit that
 * moves the staged bytes into place as a versioned write. Apart from local-folder-tier.ts because an upload's
 * lifecycle is a job of its own; it shares the tier's entry files, lock, tokens and clock.
 */
import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rename, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EntryHeader, WriteOutcome } from '../model/entry.js';
import { isNewer } from '../model/entry.js';
import type { BlobTokens } from './local-blob-tokens.js';
import { hashFile, isMissing, StagedUploadExistsError, TEMP_PREFIX, trailer, type EntryFiles } from './local-entry-files.js';
import type { LocalUploadParts } from './local-uploads.js';
import type { CompletedPart, PartUrl } from './multipart.js';
import { UPLOAD_RECORD_SUFFIX, UPLOADS_FOLDER, validateUploadId } from './storage-key.js';
import type { NewUpload, PresignedUrl, TierName, UploadClaim, UploadRecord } from './tier.js';
import {
  claimed,
  claimOf,
  committable,
  completed,
  decodeUpload,
  encodeUpload,
  openUpload,
  recordOf,
  released,
  uploadUrlSeconds,
  type StoredUpload,
} from './upload-record.js';

/** What the uploads share with their tier. */
export interface LocalFolderUploadsDeps {
  name: TierName;
  /** The tier's folder (absolute). */
  dir: string;
  publicBaseUrl: string;
  fsync: boolean;
  files: EntryFiles;
  parts: LocalUploadParts;
  tokens: BlobTokens;
  now: () => number;
  /** The path of a key's entry file. */
  entryPath: (ns: string, key: string) => string;
  /** Runs `fn` under the tier's per-key lock (the one its versioned writes take). */
  withLock: <T>(id: string, fn: () => Promise<T>) => Promise<T>;
  unavailable: (e: unknown) => Error;
}

/** What a completed upload leaves at its staging path until the sweep removes it. */
const COMPLETED_MARKER = 'strata:upload-completed\n';

export class LocalFolderUploads {
  constructor(private readonly d: LocalFolderUploadsDeps) {}

  /** Writes the upload's record (`_uploads/<id>.json`), then signs a PUT token for its staging file. */
  async presignUpload(upload: NewUpload, expiresInSec: number): Promise<PresignedUrl> {
    validateUploadId(upload.uploadId);
    const now = this.d.now();
    const seconds = uploadUrlSeconds(expiresInSec);
    const stored = openUpload(upload, now, seconds);
    await this.createRecord(stored);
    const exp = stored.urlExpiresAt;
    const ct = upload.contentType;
    const token = this.d.tokens.sign({ op: 'put', path: `${UPLOADS_FOLDER}/${upload.uploadId}`, exp, ...(ct ? { ct } : {}) });
    return {
      url: `${this.d.publicBaseUrl}/local-blobs/${token}`,
      method: 'PUT',
      headers: ct ? { 'content-type': ct } : {},
      expiresAt: exp,
    };
  }

  async claimUpload(uploadId: string, accept: (r: UploadRecord) => boolean): Promise<UploadClaim | undefined> {
    validateUploadId(uploadId);
    const u = await this.changeUpload(uploadId, (cur) => claimed(cur, accept, this.d.now()));
    return u ? claimOf(u) : undefined;
  }

  async releaseUpload(claim: UploadClaim): Promise<void> {
    await this.changeUpload(claim.record.uploadId, (cur) => released(cur, claim));
  }

  /**
   * For the local server: stores the bytes of a presigned upload, once (like the S3 tier's `If-None-Match: *` URL):
   * StagedUploadExistsError when something is already staged, the bytes of an earlier PUT or the marker a
   * completed upload leaves. Accepts a Buffer or a stream. Throws PAYLOAD_TOO_LARGE past `maxBytes`.
   */
  async writeStagedUpload(
    uploadId: string,
    body: Buffer | AsyncIterable<Uint8Array>,
    opts: { maxBytes?: number } = {},
  ): Promise<{ size: number }> {
    validateUploadId(uploadId);
    const path = join(this.d.dir, UPLOADS_FOLDER, uploadId);
    // Refuse before reading the body when we can; the exclusive link below decides races.
    if (
      await stat(path).then(
        () => true,
        () => false,
      )
    )
      throw new StagedUploadExistsError(path);
    const size = await this.d.files.writeAtomic(path, Buffer.isBuffer(body) ? [body] : body, opts.maxBytes, true);
    return { size };
  }

  async commitUpload(
    uploadId: string,
    ns: string,
    key: string,
    header: Omit<EntryHeader, 'size' | 'hash'>,
  ): Promise<WriteOutcome & { size: number }> {
    validateUploadId(uploadId);
    const staged = join(this.d.dir, UPLOADS_FOLDER, uploadId);
    const path = this.d.entryPath(ns, key);
    if (!committable(await this.readUpload(uploadId), ns, key)) throw this.uploadNotFound(uploadId);
    return this.d.withLock(path, async () => {
      // Under the key lock the stored version cannot change: decide first, so a refused commit leaves the staged
      // upload in place (the coordinator re-stamps a newer version and commits the same upload again).
      const cur = await this.d.files.readHeader(path);
      if (cur && !isNewer(header.version, cur, this.d.now())) {
        try {
          return { applied: false, current: cur.version, size: (await stat(staged)).size };
        } catch (e) {
          throw isMissing(e) ? this.uploadNotFound(uploadId) : this.d.unavailable(e);
        }
      }
      // From here the write applies. Take the bytes (a hard link: the staging path keeps existing, so the URL cannot
      // PUT again in between) and mark the record completed, together under the record's lock: of two commits of
      // one upload only one gets past this. After a crash the claimed file is an orphan temp file.
      const claimedFile = join(dirname(path), `${TEMP_PREFIX}commit-${randomBytes(6).toString('hex')}`);
      const recordPath = this.uploadRecordPath(uploadId);
      await this.d.withLock(recordPath, async () => {
        const u = await this.readUpload(uploadId);
        if (!committable(u, ns, key)) throw this.uploadNotFound(uploadId);
        try {
          await mkdir(dirname(path), { recursive: true });
          await link(staged, claimedFile);
        } catch (e) {
          throw isMissing(e) ? this.uploadNotFound(uploadId) : this.d.unavailable(e);
        }
        try {
          await this.d.files.writeAtomic(recordPath, [Buffer.from(encodeUpload(completed(u!)))]);
        } catch (e) {
          await this.d.files.unlinkQuiet(claimedFile).catch(() => {});
          throw e;
        }
      });
      try {
        // The marker replaces the staged bytes (an atomic rename over them): the upload URL now refuses a PUT.
        await this.d.files.writeAtomic(staged, [Buffer.from(COMPLETED_MARKER)]);
        const { size, hash } = await hashFile(claimedFile);
        const full: EntryHeader = { ...header, size, hash, tags: [...header.tags], flags: { ...header.flags } };
        const fh = await open(claimedFile, 'a');
        try {
          await fh.writeFile(trailer(full));
          if (this.d.fsync) await fh.sync();
        } finally {
          await fh.close();
        }
        await rename(claimedFile, path);
        await this.d.files.syncDir(dirname(path));
        return { applied: true, current: full.version, size };
      } catch (e) {
        await this.d.files.unlinkQuiet(claimedFile).catch(() => {});
        throw this.d.unavailable(e);
      }
    });
  }

  // ---- asynchronous completions (upload-record.ts UploadRecords) -----------------------------------------

  async stagedBytes(uploadId: string): Promise<number | undefined> {
    try {
      return (await stat(join(this.d.dir, UPLOADS_FOLDER, validateUploadId(uploadId)))).size;
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw this.d.unavailable(e);
    }
  }

  readUploadRecord(uploadId: string): Promise<StoredUpload | undefined> {
    return this.readUpload(uploadId);
  }

  changeUploadRecord(uploadId: string, change: (u: StoredUpload) => StoredUpload | undefined): Promise<StoredUpload | undefined> {
    return this.changeUpload(uploadId, change);
  }

  // ---- multipart uploads (tiers/multipart.ts; the part files: local-uploads.ts) ----------------------------

  /** Writes the record of a multipart upload: no staging URL, part URLs come from {@link presignParts}. */
  async createMultipartUpload(upload: NewUpload, expiresInSec: number): Promise<{ expiresAt: number }> {
    validateUploadId(upload.uploadId);
    const stored: StoredUpload = {
      ...openUpload(upload, this.d.now(), uploadUrlSeconds(expiresInSec)),
      multipart: { id: 'local' },
    };
    await this.createRecord(stored);
    return { expiresAt: stored.urlExpiresAt };
  }

  async presignParts(
    uploadId: string,
    partNumbers: readonly number[],
    accept: (r: UploadRecord) => boolean,
    expiresInSec: number,
  ): Promise<PartUrl[] | undefined> {
    const u = await this.readUpload(uploadId);
    const now = this.d.now();
    if (!u?.multipart || u.state !== 'open' || now >= u.urlExpiresAt || !accept(recordOf(u))) return undefined;
    const exp = Math.min(u.urlExpiresAt, now + uploadUrlSeconds(expiresInSec) * 1000);
    const path = `${UPLOADS_FOLDER}/${uploadId}`;
    return partNumbers.map((n) => ({
      partNumber: n,
      url: `${this.d.publicBaseUrl}/local-blobs/${this.d.tokens.sign({ op: 'part', path, exp, n })}`,
      method: 'PUT',
      headers: {},
      expiresAt: exp,
    }));
  }

  /**
   * For the local server: stores a part of a multipart upload that is not completed (a part PUT again replaces the
   * earlier one, as S3's UploadPart). Undefined when the upload is unknown, completed or aborted.
   */
  async writeUploadPart(
    uploadId: string,
    partNumber: number,
    body: AsyncIterable<Uint8Array>,
    opts: { maxBytes: number },
  ): Promise<{ etag: string; size: number } | undefined> {
    const u = await this.readUpload(uploadId);
    if (!u?.multipart || u.state === 'completed') return undefined;
    try {
      return await this.d.parts.write(uploadId, partNumber, body, opts.maxBytes);
    } catch (e) {
      throw this.d.unavailable(e);
    }
  }

  async completeParts(claim: UploadClaim, parts: readonly CompletedPart[]): Promise<void> {
    const { uploadId } = claim.record;
    const bytes = await this.d.parts.assembled(uploadId, parts);
    try {
      await this.writeStagedUpload(uploadId, bytes);
    } catch (e) {
      // Assembled by an earlier completion whose commit failed: the same parts, staged already.
      if (!(e instanceof StagedUploadExistsError)) throw e;
    }
    await this.d.parts.remove(uploadId);
  }

  async abortUpload(claim: UploadClaim): Promise<void> {
    const { uploadId } = claim.record;
    // Closed first (never committable again), then the bytes go; the marker keeps the staging URL from a PUT.
    await this.changeUpload(uploadId, (cur) => (cur.claimId === claim.claimId ? completed(cur) : undefined));
    await this.d.files.writeAtomic(join(this.d.dir, UPLOADS_FOLDER, uploadId), [Buffer.from(COMPLETED_MARKER)]);
    await this.d.parts.remove(uploadId);
  }

  /** Writes a new upload's record, once: an id already taken is refused. */
  private async createRecord(stored: StoredUpload): Promise<void> {
    try {
      await this.d.files.writeAtomic(
        this.uploadRecordPath(stored.uploadId),
        [Buffer.from(encodeUpload(stored))],
        undefined,
        true,
      );
    } catch (e) {
      throw e instanceof StagedUploadExistsError ? new ValidationError('uploadId', 'this upload id is taken') : e;
    }
  }

  private uploadRecordPath(uploadId: string): string {
    return join(this.d.dir, UPLOADS_FOLDER, `${validateUploadId(uploadId)}${UPLOAD_RECORD_SUFFIX}`);
  }

  private async readUpload(uploadId: string): Promise<StoredUpload | undefined> {
    try {
      return decodeUpload(await readFile(this.uploadRecordPath(uploadId), 'utf8'), uploadId);
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw this.d.unavailable(e);
    }
  }

  /** Read-modify-write of an upload's record under its lock (one process per directory, see the class comment). */
  private async changeUpload(
    uploadId: string,
    change: (u: StoredUpload) => StoredUpload | undefined,
  ): Promise<StoredUpload | undefined> {
    const recordPath = this.uploadRecordPath(uploadId);
    return this.d.withLock(recordPath, async () => {
      const cur = await this.readUpload(uploadId);
      const next = cur && change(cur);
      if (!next) return undefined;
      await this.d.files.writeAtomic(recordPath, [Buffer.from(encodeUpload(next))]);
      return next;
    });
  }

  private uploadNotFound(uploadId: string): NotFoundError {
    return new NotFoundError(`upload '${uploadId}' not found (nothing was uploaded, or it was already committed)`, { uploadId });
  }
}
