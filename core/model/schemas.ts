// Rules on what users send that more than the API checks (workflow inputs, the tier migrator): written once, here.
import * as z from 'zod';
import { ValidationError } from '../errors.js';

/** The longest TTL, in seconds: one year. */
export const MAX_TTL_SECONDS = 31_536_000;
/** A tag: 1-64 characters of letters, digits, `_`, `.`, `:` or `-`. */
export const TAG_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;
/** The most tags one entry carries. */
export const MAX_TAGS = 16;

export const ttlSchema = z.number().int().min(1).max(MAX_TTL_SECONDS);
export const tagsSchema = z
  .array(z.string().regex(TAG_PATTERN, 'tags are 1-64 characters of A-Z, a-z, 0-9, "_", ".", ":" or "-"'))
  .max(MAX_TAGS);

/**
 * Parses `value` with `schema`, or throws ValidationError (400) naming the first bad field as a path from `root`
 * (`body.items[2].ttl`), so the caller sees which of its inputs to fix.
 */
export function parseWith<T extends z.ZodType>(schema: T, value: unknown, root: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = [root, ...issue.path.map(String)].join('.').replace(/\.(\d+)(?=\.|$)/g, '[$1]');
  throw new ValidationError(field, issue.message);
}
