import { getApiContext, setApiContext, type BuiltContext } from '../../core/composition/api-context.js';

/**
 * After a test that built the container's API context from process.env: closes its tiers, forgets it, and puts
 * process.env back as `saved` (variables the test added are removed).
 */
export async function resetApiRuntime(saved: NodeJS.ProcessEnv): Promise<void> {
  const ctx = (await getApiContext().catch(() => undefined)) as BuiltContext | undefined;
  for (const t of ctx?.tiers ?? []) await t.close?.();
  setApiContext(undefined);
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
}
