/**
 * The folder tier's multipart parts (tiers/multipart.ts), one file each beside the upload's record:
 * `_uploads/<uploadId>.part-<number>-<md5>`. The MD5 in the name is the part's ETag (as S3's for a part), so a
 * completion that names a part by its ETag finds exactly those bytes, and a part PUT again under the same number
 * (S3 lets a part be replaced) leaves the older file aside, removed once the upload ends or by the tier's sweep of
 * `_uploads/` (files there older than a day).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { StrataError, ValidationError } from '../errors.js';
import { checkPartList, checkPartSizes, MAX_PARTS, type CompletedPart } from './multipart.js';
import { validateUploadId } from './storage-key.js';

const ETAG = /^"?([0-9a-f]{32})"?$/;

export class LocalUploadParts {
  /** `dir`: the tier's `_uploads` folder. */
  constructor(
    private readonly dir: string,
    private readonly fsync: boolean,
  ) {}

  /** Stores one part (replacing an earlier PUT of its number); PAYLOAD_TOO_LARGE past `maxBytes`. */
  async write(
    uploadId: string,
    partNumber: number,
    body: AsyncIterable<Uint8Array>,
    maxBytes: number,
  ): Promise<{ etag: string; size: number }> {
    validateUploadId(uploadId);
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PARTS)
      throw new ValidationError('partNumber', `part numbers are 1..${MAX_PARTS}`);
    const tmp = join(this.dir, `.tmp-part-${randomBytes(6).toString('hex')}`);
    const md5 = createHash('md5');
    let size = 0;
    const fh = await open(tmp, 'wx');
    try {
      for await (const chunk of body) {
        size += chunk.length;
        if (size > maxBytes)
          throw new StrataError('PAYLOAD_TOO_LARGE', `a part is at most ${maxBytes} bytes`, { limit: maxBytes });
        md5.update(chunk);
        await fh.writeFile(chunk);
      }
      if (this.fsync) await fh.sync();
    } catch (e) {
      await fh.close().catch(() => {});
      await unlink(tmp).catch(() => {});
      throw e;
    }
    await fh.close();
    const hex = md5.digest('hex');
    await rename(tmp, join(this.dir, partName(uploadId, partNumber, hex)));
    return { etag: `"${hex}"`, size };
  }

  /**
   * The bytes of the named parts in order, after checking them all (each present with that ETag, sizes per S3's
   * rules): VALIDATION_FAILED naming the first offending part, before any byte is read.
   */
  async assembled(uploadId: string, parts: readonly CompletedPart[]): Promise<AsyncIterable<Uint8Array>> {
    checkPartList(parts);
    const files: string[] = [];
    const sizes: number[] = [];
    for (const [i, p] of parts.entries()) {
      const m = ETAG.exec(p.etag);
      const file = m ? join(this.dir, partName(uploadId, p.partNumber, m[1]!)) : undefined;
      const size = file
        ? await stat(file).then(
            (s) => s.size,
            () => undefined,
          )
        : undefined;
      if (file === undefined || size === undefined)
        throw new ValidationError(
          `body.parts[${i}]`,
          `part ${p.partNumber} with ETag ${p.etag} was not uploaded (send the ETag its PUT answered)`,
        );
      files.push(file);
      sizes.push(size);
    }
    checkPartSizes(sizes);
    return (async function* () {
      for (const f of files) for await (const chunk of createReadStream(f)) yield chunk as Buffer;
    })();
  }

  /** Removes every part file of the upload (best effort: the sweep takes what is left). */
  async remove(uploadId: string): Promise<void> {
    const prefix = `${validateUploadId(uploadId)}.part-`;
    const names = await readdir(this.dir).catch(() => [] as string[]);
    await Promise.all(names.filter((n) => n.startsWith(prefix)).map((n) => unlink(join(this.dir, n)).catch(() => {})));
  }
}

function partName(uploadId: string, partNumber: number, md5hex: string): string {
  return `${uploadId}.part-${String(partNumber).padStart(5, '0')}-${md5hex}`;
}
