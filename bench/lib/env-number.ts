/** A number from the environment, or `dflt`; anything else than a number that passes `ok` stops the run. */
export function envNumber(name: string, dflt: number, ok: (v: number) => boolean, what: string): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return dflt;
  const v = Number(raw);
  if (!Number.isFinite(v) || !ok(v)) throw new Error(`${name} must be ${what} (got '${raw}')`);
  return v;
}
