/**
 * One way to turn zod's issues into a message a user can act on: `path: message` per issue, joined. Every
 * configuration, document and request check formats its issues here, so they all read alike.
 */

/** The part of a zod issue the message needs (structural, so callers need not import zod's types). */
export interface IssueLike {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

export interface FormatIssuesOptions {
  /** What names the whole input when an issue has an empty path. @default '(root)' */
  readonly root?: string;
  /** @default '; ' */
  readonly separator?: string;
}

/** Each issue as `path: message` (`a.b.0: Expected number`), the path of the whole input shown as `root`. */
export function issueLines(issues: readonly IssueLike[], root = '(root)'): string[] {
  return issues.map((i) => `${i.path.map(String).join('.') || root}: ${i.message}`);
}

/** {@link issueLines} joined into one message. */
export function formatIssues(issues: readonly IssueLike[], options: FormatIssuesOptions = {}): string {
  return issueLines(issues, options.root ?? '(root)').join(options.separator ?? '; ');
}
