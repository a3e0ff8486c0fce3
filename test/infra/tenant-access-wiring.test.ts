import { ConfigurationError, ENVIRONMENTS, loadEnvironmentConfig } from '../../cdk/config/load.js';
import { API_ROUTES } from '../../core/api/routes.js';
import { synthesized } from './helpers/synth.js';

type Fn = { Type: string; Properties: { Description?: string; Environment?: { Variables?: Record<string, unknown> } } };

describe('Tenant access wiring', () => {
  const dev = synthesized('dev', { nag: false });
  const functions = Object.values((dev.templates.api.toJSON() as { Resources: Record<string, Fn> }).Resources).filter(
    (r) => r.Type === 'AWS::Lambda::Function',
  );

  // checkAdminAccess (core/api/tenant-access.ts) lets every caller through when no tenant map is configured
  // (local runs). A deployed admin function without the map would let any tenant's key start a ScaleIn.
  it.each(['admin', 'keys', 'batch', 'transfer'] as const)('gives the %s function the tenant map its routes check', (fn) => {
    const routes = API_ROUTES.filter((r) => r.fn === fn);
    expect(routes.some((r) => r.resource.includes('{ns}') || r.auth === 'admin')).toBe(true);
    const f = functions.find((x) => x.Properties.Description?.includes(`API '${fn}'`));
    expect(f?.Properties.Environment?.Variables?.STRATA_TENANT_ACCESS).toBeDefined();
  });

  it('marks only tenants configured with "admin": true as admin keys, and lets such a tenant list no namespace', () => {
    const files = {
      dev: {
        ...structuredClone(ENVIRONMENTS.dev),
        tenants: [
          ...ENVIRONMENTS.dev.tenants,
          { name: 'ops', namespaces: [], admin: true, throttle: { rateLimit: 5, burstLimit: 10 } },
        ],
      },
    };
    const config = loadEnvironmentConfig('dev', {}, files);
    expect(config.tenants.map((t) => [t.name, t.admin])).toEqual([
      ['developers', false],
      ['ops', true],
    ]);
    const bad = {
      dev: {
        ...structuredClone(ENVIRONMENTS.dev),
        tenants: [{ name: 'x', namespaces: [], throttle: { rateLimit: 5, burstLimit: 10 } }],
      },
    };
    expect(() => loadEnvironmentConfig('dev', {}, bad)).toThrow(ConfigurationError);
    expect(() => loadEnvironmentConfig('dev', {}, bad)).toThrow(
      /at least one namespace \(an operator key with none: "admin": true\)/,
    );
  });
});
