import type { IConstruct } from 'constructs';

/** Invalid construct input. The message names the construct and says what to change. */
export class InvalidPropsError extends Error {
  constructor(scope: IConstruct, message: string) {
    super(`${scope.node.path}: ${message}`);
    this.name = 'InvalidPropsError';
  }
}

/** Throws InvalidPropsError unless `ok`. */
export function check(scope: IConstruct, ok: boolean, message: string): asserts ok {
  if (!ok) throw new InvalidPropsError(scope, message);
}

/** Whether `n` is an integer in [min, max]; tokens are never passed here (all props are literals from config). */
export function intIn(n: number, min: number, max: number): boolean {
  return Number.isInteger(n) && n >= min && n <= max;
}
