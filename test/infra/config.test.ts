import { ENVIRONMENTS, loadEnvironmentConfig } from '../../cdk/config/load.js';
import { ENVIRONMENT_NAMES, type EnvironmentConfigInput } from '../../cdk/config/schema.js';
import { parseTenantAccess } from '../../core/model/tenancy.js';
import { configErrorOf } from './helpers/config-errors.js';

/** A dev file with one change, for the rule under test. */
function withDev(change: (c: EnvironmentConfigInput) => EnvironmentConfigInput): Record<string, EnvironmentConfigInput> {
  return { dev: change(structuredClone(ENVIRONMENTS.dev)) };
}

/** Staging and prod need an alarm destination at synth time; the committed-file checks give them one. */
const DESTINATION = { alarmEmails: 'oncall@example.org' };
const TOPIC_ARN = 'arn:aws:sns:us-east-1:123456789012:strata-oncall';

/** A file with one change, for an environment other than dev. */
function withFile(name: 'staging' | 'prod', change: (c: EnvironmentConfigInput) => EnvironmentConfigInput) {
  return { [name]: change(structuredClone(ENVIRONMENTS[name])) };
}

const errorOf = configErrorOf;

describe('Environment configuration', () => {
  describe('committed files', () => {
    it.each(ENVIRONMENT_NAMES)('%s is valid and commits no account', (name) => {
      // Act
      const config = loadEnvironmentConfig(name, { context: DESTINATION });
      // Assess
      expect(config.name).toBe(name);
      expect(config.account).toBeUndefined();
      expect(ENVIRONMENTS[name].account).toBeUndefined();
      expect(config.availabilityZones.every((az) => az.startsWith(config.region))).toBe(true);
    });

    it('keeps NAT gateways off by default in every environment', () => {
      for (const name of ENVIRONMENT_NAMES)
        expect(loadEnvironmentConfig(name, { context: DESTINATION }).network.natGateways).toBe(0);
    });

    it.each(ENVIRONMENT_NAMES)(
      '%s commits no alarm destination (no budgets.alertEmails, no monitoring.alarmDestination)',
      (name) => {
        expect(ENVIRONMENTS[name].budgets).not.toHaveProperty('alertEmails');
        expect(ENVIRONMENTS[name].monitoring ?? {}).not.toHaveProperty('alarmDestination');
      },
    );

    it('loads dev without an alarm destination (it warns at synth instead)', () => {
      expect(loadEnvironmentConfig('dev', { env: {} }).monitoring.alarmDestination).toBeUndefined();
    });
  });

  describe('sources', () => {
    it('takes the account from context first, then CDK_DEPLOY_ACCOUNT, then CDK_DEFAULT_ACCOUNT', () => {
      const env = { CDK_DEPLOY_ACCOUNT: '222222222222', CDK_DEFAULT_ACCOUNT: '333333333333' };
      expect(loadEnvironmentConfig('dev', { context: { account: '111111111111' }, env }).account).toBe('111111111111');
      expect(loadEnvironmentConfig('dev', { env }).account).toBe('222222222222');
      expect(loadEnvironmentConfig('dev', { env: { CDK_DEFAULT_ACCOUNT: '333333333333' } }).account).toBe('333333333333');
    });

    it('ignores CDK_DEFAULT_REGION (the committed AZs belong to the committed region)', () => {
      expect(loadEnvironmentConfig('dev', { env: { CDK_DEFAULT_REGION: 'eu-west-1' } }).region).toBe('us-east-1');
    });

    it('takes region and AZs from context together', () => {
      const c = loadEnvironmentConfig('dev', { context: { region: 'eu-west-1', availabilityZones: 'eu-west-1a, eu-west-1b' } });
      expect(c.region).toBe('eu-west-1');
      expect(c.availabilityZones).toEqual(['eu-west-1a', 'eu-west-1b']);
    });

    const destinationOf = (name: 'staging' | 'prod', sources: Parameters<typeof loadEnvironmentConfig>[1]) =>
      loadEnvironmentConfig(name, sources).monitoring.alarmDestination;

    it('takes the alarm destination from context (-c alarmEmails, comma-separated, or -c alarmTopicArn)', () => {
      const two = { emails: ['a@example.org', 'b@example.org'] };
      expect(destinationOf('prod', { context: { alarmEmails: ' a@example.org, b@example.org ' } })).toEqual(two);
      expect(destinationOf('prod', { context: { alarmTopicArn: TOPIC_ARN } })).toEqual({ topicArn: TOPIC_ARN });
      // cdk.json context may hold a list.
      expect(destinationOf('prod', { context: { alarmEmails: ['a@example.org'] } })).toEqual({ emails: ['a@example.org'] });
    });

    it('takes the alarm destination from STRATA_ALARM_EMAILS / STRATA_ALARM_TOPIC_ARN when the context gives none', () => {
      const two = { emails: ['a@example.org', 'b@example.org'] };
      expect(destinationOf('staging', { env: { STRATA_ALARM_EMAILS: 'a@example.org,b@example.org' } })).toEqual(two);
      expect(destinationOf('staging', { env: { STRATA_ALARM_TOPIC_ARN: TOPIC_ARN } })).toEqual({ topicArn: TOPIC_ARN });
    });

    it("lets a destination given with -c replace the environment's whole, never mixing the two", () => {
      const c = loadEnvironmentConfig('prod', {
        context: { alarmEmails: 'a@example.org' },
        env: { STRATA_ALARM_TOPIC_ARN: TOPIC_ARN },
      });
      expect(c.monitoring.alarmDestination).toEqual({ emails: ['a@example.org'] });
    });

    it('applies documented defaults', () => {
      const c = loadEnvironmentConfig('dev');
      expect(c.coldTier.tombstoneTtlMinutes).toBe(10);
      expect(c.api.urlTtlSeconds).toBe(900);
      expect(c.api.functions.keys.timeoutSeconds).toBe(29);
      expect(c.fleet.port).toBe(7070);
      expect(c.fleet.dataVolume.iops).toBe(3000);
    });
  });

  describe('rules', () => {
    it('fails on an unknown environment, naming the valid ones', () => {
      expect(errorOf(() => loadEnvironmentConfig('qa'))).toMatch(/unknown environment 'qa': choose one of dev, staging, prod/);
      expect(errorOf(() => loadEnvironmentConfig(undefined))).toMatch(/\(none given\)/);
    });

    it('fails when the region changes without matching AZs', () => {
      expect(errorOf(() => loadEnvironmentConfig('dev', { context: { region: 'eu-west-1' } }))).toMatch(
        /availability zone 'us-east-1a' is not in region eu-west-1 \(pass -c availabilityZones=eu-west-1a,eu-west-1b/,
      );
    });

    it('fails with fewer than 2 AZs', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, availabilityZones: ['us-east-1a'] })),
          ),
        ),
      ).toMatch(/at least 2 availability zones/);
    });

    it('fails on a malformed account', () => {
      expect(errorOf(() => loadEnvironmentConfig('dev', { context: { account: '1234' } }))).toMatch(
        /account: account must be a 12-digit AWS account id/,
      );
    });

    it('fails on a log retention CloudWatch does not offer', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, logRetentionDays: 10 })),
          ),
        ),
      ).toMatch(/logRetentionDays: log retention must be one of CloudWatch's periods/);
    });

    it('fails when NAT gateways outnumber AZs', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, network: { ...c.network, natGateways: 3 } })),
          ),
        ),
      ).toMatch(/natGateways \(3\) cannot exceed the number of availability zones \(2\)/);
    });

    it('fails when interface endpoints ask for more AZs than exist', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, network: { ...c.network, interfaceEndpointAzs: 3 } })),
          ),
        ),
      ).toMatch(/interfaceEndpointAzs \(3\) cannot exceed/);
    });

    it('fails on a VPC block outside /16-/20', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, network: { ...c.network, cidr: '10.0.0.0/24' } })),
          ),
        ),
      ).toMatch(/cidr must be an IPv4 block from \/16 to \/20/);
    });

    it('fails on ElastiCache limits outside the service range', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, hotTier: { ...c.hotTier, maxEcpuPerSecond: 10 } })),
          ),
        ),
      ).toMatch(/hotTier\.maxEcpuPerSecond/);
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, hotTier: { ...c.hotTier, maxDataStorageGb: 0 } })),
          ),
        ),
      ).toMatch(/hotTier\.maxDataStorageGb/);
    });

    it('fails on a snapshot time without snapshots', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, hotTier: { ...c.hotTier, dailySnapshotTime: '04:00' } })),
          ),
        ),
      ).toMatch(/dailySnapshotTime needs snapshotRetentionDays > 0/);
    });

    it('fails on a malformed snapshot time', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, hotTier: { ...c.hotTier, snapshotRetentionDays: 1, dailySnapshotTime: '25:00' } })),
          ),
        ),
      ).toMatch(/dailySnapshotTime is "HH:MM" in UTC/);
    });

    it("fails on an API function timeout above API Gateway's 29 s", () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, api: { ...c.api, functions: { keys: { timeoutSeconds: 60 } } } })),
          ),
        ),
      ).toMatch(/api\.functions\.keys\.timeoutSeconds: API functions cannot outlive API Gateway's 29 s integration timeout/);
    });

    it('fails when the near cache would take more than half the memory', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, api: { ...c.api, functions: { service: { memoryMb: 256, nearCacheMb: 200 } } } })),
          ),
        ),
      ).toMatch(/nearCacheMb \(200\) must be at most half of memoryMb \(256\)/);
    });

    it('fails when staged uploads would expire before their upload URLs', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, api: { ...c.api, urlTtlSeconds: 3 * 86_400 } })),
          ),
        ),
      ).toMatch(/stagingExpirationDays \(1\) must cover the upload URL lifetime \(259200 s = 3 days\)/);
    });

    it('fails without tenants', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, tenants: [] })),
          ),
        ),
      ).toMatch(/define at least one tenant/);
    });

    it('fails on duplicate tenants', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, tenants: [c.tenants[0]!, c.tenants[0]!] })),
          ),
        ),
      ).toMatch(/tenant 'developers' is defined twice/);
    });

    it('fails on a tenant namespace the API would reject', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, tenants: [{ ...c.tenants[0]!, namespaces: ['Bad NS'] }] })),
          ),
        ),
      ).toMatch(/tenants\.0\.namespaces\.0: namespaces are 1-63 characters/);
    });

    it('takes prefix grants ("web-*", "*") as tenant namespaces, in the form the API enforces them', () => {
      const c = loadEnvironmentConfig(
        'dev',
        {},
        withDev((d) => ({ ...d, tenants: [{ ...d.tenants[0]!, namespaces: ['web-*', 'reports', '*'] }] })),
      );
      expect(c.tenants[0]!.namespaces).toEqual(['web-*', 'reports', '*']);
      expect(
        parseTenantAccess(
          JSON.stringify([{ keyId: 'id', tenant: c.tenants[0]!.name, namespaces: c.tenants[0]!.namespaces }]),
        )!.grantOf('id')!.namespaces,
      ).toEqual(['web-*', 'reports', '*']);
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((d) => ({ ...d, tenants: [{ ...d.tenants[0]!, namespaces: ['-web*'] }] })),
          ),
        ),
      ).toMatch(/tenants\.0\.namespaces\.0: .*prefix followed by "\*"/);
    });

    it('fails on a non-positive throttle', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, api: { ...c.api, throttle: { rateLimit: 0, burstLimit: 1 } } })),
          ),
        ),
      ).toMatch(/api\.throttle\.rateLimit: rateLimit must be a positive number/);
    });

    it('fails on namespace policies the runtime would reject', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, api: { ...c.api, namespaces: { defaults: { writeMode: 'sometimes' } } as never } })),
          ),
        ),
      ).toMatch(/api\.namespaces\.defaults\.writeMode/);
    });

    it('fails on unknown keys (typos)', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, fleet: { ...c.fleet, instanceTyp: 'x' } as never })),
          ),
        ),
      ).toMatch(/fleet: Unrecognized key/);
    });

    it.each(['staging', 'prod'] as const)('fails in %s without an alarm destination, saying how to pass one', (name) => {
      const message = errorOf(() => loadEnvironmentConfig(name, { env: {} }));
      expect(message).toMatch(new RegExp(`^no alarm destination for environment '${name}'`));
      expect(message).toContain(`npm run synth -- --env ${name} -c alarmEmails=`);
      expect(message).toContain(`npm run synth -- --env ${name} -c alarmTopicArn=arn:aws:sns:us-east-1:`);
      expect(message).toMatch(/STRATA_ALARM_EMAILS=.* or STRATA_ALARM_TOPIC_ARN=/);
    });

    it('fails on both alarm e-mails and an alarm topic', () => {
      expect(
        errorOf(() => loadEnvironmentConfig('prod', { context: { alarmEmails: 'a@example.org', alarmTopicArn: TOPIC_ARN } })),
      ).toMatch(/give -c alarmEmails or -c alarmTopicArn, not both/);
      const env = { STRATA_ALARM_EMAILS: 'a@example.org', STRATA_ALARM_TOPIC_ARN: TOPIC_ARN };
      expect(errorOf(() => loadEnvironmentConfig('prod', { env }))).toMatch(
        /give STRATA_ALARM_EMAILS or STRATA_ALARM_TOPIC_ARN, not both/,
      );
    });

    it('fails on an alarm e-mail that is not an address, naming where it came from', () => {
      expect(errorOf(() => loadEnvironmentConfig('prod', { env: { STRATA_ALARM_EMAILS: 'oncall@example.org,oncall' } }))).toMatch(
        /invalid alarm destination STRATA_ALARM_EMAILS=oncall@example.org,oncall: alarm e-mails must be e-mail addresses/,
      );
    });

    it('fails on an alarm topic that is not an SNS topic ARN', () => {
      expect(
        errorOf(() => loadEnvironmentConfig('prod', { context: { alarmTopicArn: 'arn:aws:sqs:us-east-1:123456789012:q' } })),
      ).toMatch(/invalid alarm destination -c alarmTopicArn=arn:aws:sqs:.*: the alarm topic must be an SNS topic ARN/);
    });

    it('refuses alarm e-mails committed as budgets.alertEmails, saying where they go now', () => {
      const files = withFile('prod', (c) => ({ ...c, budgets: { ...c.budgets, alertEmails: ['oncall@example.org'] } as never }));
      const message = errorOf(() => loadEnvironmentConfig('prod', { context: DESTINATION }, files));
      expect(message).toMatch(/budgets\.alertEmails: budgets\.alertEmails is no longer read: where alarms go is never committed/);
      expect(message).toContain('-c alarmEmails=');
      expect(message).toContain('STRATA_ALARM_TOPIC_ARN');
    });

    it('refuses an alarm destination committed in the file', () => {
      const files = withFile('staging', (c) => ({
        ...c,
        monitoring: { ...c.monitoring, alarmDestination: { topicArn: TOPIC_ARN } },
      }));
      expect(errorOf(() => loadEnvironmentConfig('staging', { context: DESTINATION }, files))).toMatch(
        /cdk\/config\/staging\.ts commits monitoring\.alarmDestination: remove it/,
      );
    });

    it('fails when a file declares another environment name', () => {
      expect(
        errorOf(() =>
          loadEnvironmentConfig(
            'dev',
            {},
            withDev((c) => ({ ...c, name: 'prod' })),
          ),
        ),
      ).toMatch(/cdk\/config\/dev\.ts declares name 'prod'/);
    });
  });
});
