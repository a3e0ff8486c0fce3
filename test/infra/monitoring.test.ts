import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { buildStrataApp } from '../../cdk/app.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { environmentConfigSchema, type EnvironmentConfig, type EnvironmentConfigInput } from '../../cdk/config/schema.js';
import { dev as devFile } from '../../cdk/config/dev.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { StrataAlarms, type StrataAlarmsProps } from '../../cdk/constructs/strata-alarms.js';
import { InvalidPropsError } from '../../cdk/constructs/validation.js';
import { DASHBOARDS, referencedMetricKeys } from '../../dashboards/index.js';
import { costPublisherSettingsSchema } from '../../core/cost/publisher/settings.js';
import { costAndFleetPoints } from '../../core/cost/publisher/publish-cost.js';
import { priceLiveUsage } from '../../core/cost/model/live-cost.js';
import { priceBook } from '../../core/cost/model/price-catalog.js';
import { METRIC_NAMESPACES, METRICS, type MetricDef } from '../../core/metrics/metric-catalog.js';
import { PLACEHOLDER_CACHENODE, cdkJsonContext, synthesized, type SynthesizedEnvironment } from './helpers/synth.js';
import { alarmProps } from './helpers/alarm-props.js';

type Json = Record<string, unknown>;
type Resource = { Type: string; Properties: Json };

const dev = synthesized('dev');
const prod = synthesized('prod');

function resources(s: SynthesizedEnvironment, type: string): Resource[] {
  return Object.values(s.templates.monitoring.findResources(type)) as Resource[];
}

function alarmsByName(s: SynthesizedEnvironment): Record<string, Json> {
  return Object.fromEntries(resources(s, 'AWS::CloudWatch::Alarm').map((r) => [r.Properties.AlarmName as string, r.Properties]));
}

function topicRef(s: SynthesizedEnvironment): Json {
  const [id] = Object.keys(s.templates.monitoring.findResources('AWS::SNS::Topic'));
  return { Ref: id! };
}

/** A template value with every CloudFormation intrinsic replaced by `placeholder`, joined back into a string. */
function flatten(value: unknown, placeholder = 'TOKEN'): string {
  if (typeof value === 'string') return value;
  const join = (value as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (join) return join[1].map((p) => (typeof p === 'string' ? p : placeholder)).join(join[0]);
  return placeholder;
}

/** Metric references of a dashboard body: plain metrics ([namespace, name, dim, value, ...]) and SEARCH expressions. */
function dashboardMetrics(body: string): { namespace: string; name: string; dimensions: string[]; search: boolean }[] {
  const parsed = JSON.parse(body) as { widgets: { properties: { metrics?: unknown[][] } }[] };
  const out: { namespace: string; name: string; dimensions: string[]; search: boolean }[] = [];
  for (const w of parsed.widgets) {
    for (const row of w.properties.metrics ?? []) {
      const first = row[0];
      if (typeof first === 'object' && first !== null && 'expression' in first) {
        const m = /^SEARCH\('\{([^,}]+),([^}]*)\} MetricName="([^"]+)"/.exec((first as { expression: string }).expression);
        if (m) out.push({ namespace: m[1]!, name: m[3]!, dimensions: m[2]!.split(','), search: true });
        continue;
      }
      const strings = row.filter((x): x is string => typeof x === 'string');
      // Rows after the first of a widget may abbreviate with '.', CDK does not: each row names its metric in full.
      const [namespace, name, ...dims] = strings;
      out.push({ namespace: namespace!, name: name!, dimensions: dims.filter((_, i) => i % 2 === 0), search: false });
    }
  }
  return out;
}

function catalogDef(namespace: string, name: string): MetricDef | undefined {
  return Object.values(METRICS).find((d: MetricDef) => d.namespace === namespace && d.name === name);
}

/** Metric name + sorted dimension names of everything the cost publisher publishes for a fleet with nodes and tenants. */
function publisherOutput(): Set<string> {
  const cost = priceLiveUsage(
    {
      window: { start: new Date(0), end: new Date(3_600_000) },
      fleet: { instances: [], volumes: [] },
      apiRequests: 0,
      functions: [],
      hits: 1,
      namespaces: [{ namespace: 'pages', requests: 1, bytes: 1 }],
    },
    priceBook(),
    {
      tenants: [{ name: 'web', namespaces: ['pages'] }],
      monitoring: {
        customMetrics: 1,
        dashboards: 0,
        alarmMetrics: 0,
        putMetricDataCallsPerHour: 0,
        getMetricDataMetricsPerHour: 0,
      },
    },
  );
  const fleet = {
    ringVersion: 1,
    nodes: 1,
    fills: [{ node: 'n1', percent: 10 }],
    maxFillPercent: 10,
    migrationsInProgress: 0,
    silent: [],
  };
  const points = costAndFleetPoints('dev', cost, { monthToDate: 0, hoursLeft: 1, projected: 1 }, 0.5, fleet);
  return new Set(points.map((p) => `${p.def.namespace}|${p.def.name}|${Object.keys(p.dimensions).sort().join(',')}`));
}

describe('Monitoring stack', () => {
  describe.each([
    ['dev', dev],
    ['prod', prod],
  ] as const)('%s', (env, s) => {
    const c = s.config;
    const alarms = alarmsByName(s);
    const name = (suffix: string) => `strata-${env}-${suffix}`;

    it('alarms on the projected month at the Warning and Critical shares of the budget', () => {
      for (const [level, fraction] of [
        ['warning', c.budgets.warningFraction],
        ['critical', c.budgets.criticalFraction],
      ] as const) {
        expect(alarms[name(`projected-cost-${level}`)]).toMatchObject({
          Namespace: 'Strata/Cost',
          MetricName: 'ProjectedMonthlyCost',
          Dimensions: [{ Name: 'Environment', Value: env }],
          Statistic: 'Maximum',
          Period: c.monitoring.costPublisher.scheduleMinutes * 60,
          Threshold: c.budgets.monthlyUsd * fraction,
          ComparisonOperator: 'GreaterThanThreshold',
          TreatMissingData: 'notBreaching',
        });
      }
    });

    it('alarms on the hit ratio (metric math over Hits and Misses) below the floor, ignoring quiet periods', () => {
      const a = alarms[name('hit-ratio')]!;
      expect(a).toMatchObject({ Threshold: c.monitoring.alarms.hitRatioFloorPercent, ComparisonOperator: 'LessThanThreshold' });
      const metrics = a.Metrics as {
        Id: string;
        Expression?: string;
        ReturnData?: boolean;
        MetricStat?: {
          Metric: { MetricName: string; Namespace: string; Dimensions: { Name: string; Value: string }[] };
          Stat: string;
          Period: number;
        };
      }[];
      const expr = metrics.find((m) => m.Expression)!;
      expect(expr.Expression).toContain(`>= ${c.monitoring.alarms.minRequestsPerPeriod}`);
      const inputs = metrics
        .filter((m) => m.MetricStat)
        .map((m) =>
          [m.MetricStat!.Metric.MetricName, ...m.MetricStat!.Metric.Dimensions.map((d) => `${d.Name}=${d.Value}`)].join(' '),
        );
      expect(inputs.sort()).toEqual(
        [
          ...['cold', 'hot', 'l1', 'origin', 'warm'].map((t) => `Hits Environment=${env} Tier=${t}`),
          `Misses Environment=${env}`,
        ].sort(),
      );
      for (const m of metrics.filter((x) => x.MetricStat))
        expect(m.MetricStat!.Period).toBe(c.monitoring.alarms.trafficPeriodMinutes * 60);
    });

    it('alarms on the error rate (Errors / Requests) above the ceiling', () => {
      const a = alarms[name('error-rate')]!;
      expect(a).toMatchObject({
        Threshold: c.monitoring.alarms.errorRateCeilingPercent,
        ComparisonOperator: 'GreaterThanThreshold',
      });
      const names = (a.Metrics as { MetricStat?: { Metric: { MetricName: string } } }[]).flatMap((m) =>
        m.MetricStat ? [m.MetricStat.Metric.MetricName] : [],
      );
      expect(names.sort()).toEqual(['Errors', 'Requests']);
    });

    it('alarms on the fullest node above the watermark, and on a silent publisher', () => {
      expect(alarms[name('node-fill')]).toMatchObject({
        Namespace: 'Strata/Fleet',
        MetricName: 'MaxNodeFillPercent',
        Threshold: c.monitoring.alarms.nodeFillWatermarkPercent,
        ComparisonOperator: 'GreaterThanThreshold',
      });
      expect(alarms[name('cost-publisher-silent')]).toMatchObject({
        MetricName: 'TotalCostPerHour',
        Statistic: 'SampleCount',
        Threshold: 1,
        ComparisonOperator: 'LessThanThreshold',
        TreatMissingData: 'breaching',
      });
    });

    it('sends every alarm, and its recovery, to the alarm topic', () => {
      expect(Object.keys(alarms)).toHaveLength(s.stacks.monitoring.alarms.all.length);
      for (const a of Object.values(alarms)) {
        expect(a.AlarmActions).toEqual([topicRef(s)]);
        expect(a.OKActions).toEqual([topicRef(s)]);
      }
    });

    it('has EventBridge rules on the node-fill and critical-cost alarms going to ALARM, for workflows to target', () => {
      // (The rule on Step Functions' status changes, for the unalarmed workflows: test/infra/alarms.test.ts.)
      const rules = resources(s, 'AWS::Events::Rule').filter(
        (r) => (r.Properties.EventPattern as { source?: string[] } | undefined)?.source?.[0] === 'aws.cloudwatch',
      );
      const alarmIds = Object.fromEntries(
        Object.entries(s.templates.monitoring.findResources('AWS::CloudWatch::Alarm')).map(([id, r]) => [
          (r as Resource).Properties.AlarmName as string,
          id,
        ]),
      );
      const watched = rules.map(
        (r) => (r.Properties.EventPattern as { resources: { 'Fn::GetAtt': [string, string] }[] }).resources[0]!['Fn::GetAtt'][0],
      );
      expect(watched.sort()).toEqual([alarmIds[name('node-fill')], alarmIds[name('projected-cost-critical')]].sort());
      for (const r of rules)
        expect(r.Properties.EventPattern).toMatchObject({
          source: ['aws.cloudwatch'],
          'detail-type': ['CloudWatch Alarm State Change'],
          detail: { state: { value: ['ALARM'] } },
        });
      expect(s.stacks.monitoring.fillAlarm).toBe(s.stacks.monitoring.alarms.nodeFill);
    });

    it('runs the cost publisher on its schedule: nodejs24.x arm64 outside the VPC, no fleet secret, no retries', () => {
      const t = s.templates.monitoring;
      const minutes = c.monitoring.costPublisher.scheduleMinutes;
      t.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: `rate(${minutes} minutes)`,
        Targets: [Match.objectLike({ RetryPolicy: { MaximumRetryAttempts: 0 } })],
      });
      t.hasResourceProperties('AWS::Lambda::Function', {
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        MemorySize: c.monitoring.costPublisher.memoryMb,
        Timeout: c.monitoring.costPublisher.timeoutSeconds,
        // Outside the VPC: it needs only AWS APIs (the nodes' stats come from their reports in S3), and there
        // CloudWatch and EC2 need no interface endpoint.
        VpcConfig: Match.absent(),
        Environment: {
          Variables: Match.objectLike({
            STRATA_COST_SETTINGS: Match.anyValue(),
            STRATA_WARM_RING_PREFIX: 'strata-ring',
            STRATA_NODE_STATS_ID_PREFIX: Match.anyValue(),
          }),
        },
      });
      const variables = (r: Resource) => (r.Properties.Environment as { Variables?: Json } | undefined)?.Variables ?? {};
      const fn = resources(s, 'AWS::Lambda::Function').find((r) => variables(r).STRATA_COST_SETTINGS)!;
      expect(Object.keys(variables(fn)).filter((k) => /SECRET/.test(k))).toEqual([]);
      t.hasResourceProperties('AWS::Lambda::EventInvokeConfig', { MaximumRetryAttempts: 0 });
    });

    it("writes settings the publisher accepts: the environment's tenants, fleet tags, tiers and API functions", () => {
      const fn = resources(s, 'AWS::Lambda::Function').find(
        (r) => (r.Properties.Environment as { Variables?: Json } | undefined)?.Variables?.STRATA_COST_SETTINGS,
      )!;
      const raw = flatten((fn.Properties.Environment as { Variables: Json }).Variables.STRATA_COST_SETTINGS);
      const settings = costPublisherSettingsSchema.parse(JSON.parse(raw));
      expect(settings).toMatchObject({
        environment: env,
        tenants: c.tenants.map((t) => ({ name: t.name, namespaces: t.namespaces })),
        fleet: { tags: { 'strata:env': env, 'strata:role': 'cachenode' } },
        hot: { cacheName: `strata-${env}`, dimension: 'clusterId' },
        cold: { bucket: 'TOKEN', prefix: c.coldTier.prefix },
        apiName: `strata-${env}`,
        // Every metric the alarms read (alarms.test.ts checks the count against the template).
        monitoring: {
          dashboards: 3,
          alarmMetrics: s.stacks.monitoring.alarms.metricCount,
          runsPerHour: 60 / c.monitoring.costPublisher.scheduleMinutes,
        },
      });
      expect(settings.functions.map((f) => [f.memoryMb, f.tier])).toEqual(
        Object.values(c.api.functions).map((f) => [f.memoryMb, 'api']),
      );
    });

    it('lets the publisher put only Strata/Cost and Strata/Fleet metrics, list the tier prefix, read the ring and node reports', () => {
      const statements = resources(s, 'AWS::IAM::Policy').flatMap(
        (p) => (p.Properties.PolicyDocument as { Statement: Json[] }).Statement,
      );
      const bySid = Object.fromEntries(statements.filter((x) => x.Sid).map((x) => [x.Sid as string, x]));
      expect(bySid.PublishCostAndFleet).toMatchObject({
        Action: 'cloudwatch:PutMetricData',
        Resource: '*',
        Condition: { StringEquals: { 'cloudwatch:namespace': ['Strata/Cost', 'Strata/Fleet'] } },
      });
      expect(bySid.ReadUsage).toMatchObject({
        Action: ['cloudwatch:GetMetricData', 'ec2:DescribeInstances', 'ec2:DescribeVolumes'],
        Resource: '*',
      });
      expect(bySid.ListColdTier).toMatchObject({
        Action: 's3:ListBucket',
        Condition: { StringLike: { 's3:prefix': [`${c.coldTier.prefix}/`, `${c.coldTier.prefix}/*`] } },
      });
      // The ring store through the cold tier's read-only policies of the ring document and the nodes' reports
      // (iam-ring-store.test.ts judges what they allow); no secret, no write.
      const roles = Object.entries(s.templates.monitoring.findResources('AWS::IAM::Role'));
      const role = roles.find(([id]) => id.startsWith('CostPublisherHandlerRole'))![1] as { Properties: Json };
      const attached = JSON.stringify(role.Properties.ManagedPolicyArns);
      expect(attached).toMatch(/OutputRefColdTierRingReadRing.*OutputRefColdTierRingReadNodeStats/);
      expect(JSON.stringify(role.Properties.ManagedPolicyArns)).not.toMatch(/RingWrite/);
      expect(statements.filter((x) => JSON.stringify(x.Action).includes('secretsmanager'))).toEqual([]);
      for (const st of statements) expect(JSON.stringify(st.Action)).not.toMatch(/\*"/);
    });

    it('renders the three dashboards from dashboards/, every widget of each spec', () => {
      const boards = resources(s, 'AWS::CloudWatch::Dashboard');
      expect(boards.map((b) => b.Properties.DashboardName).sort()).toEqual(
        DASHBOARDS.map((d) => `Strata-${env}-${d.name}`).sort(),
      );
      for (const d of DASHBOARDS) {
        const body = JSON.parse(
          flatten(boards.find((b) => b.Properties.DashboardName === `Strata-${env}-${d.name}`)!.Properties.DashboardBody),
        ) as { widgets: { type: string; properties: { title?: string; markdown?: string } }[] };
        const titles = body.widgets.filter((w) => w.type === 'metric').map((w) => w.properties.title);
        expect(titles).toEqual(d.widgets.map((w) => w.title));
      }
    });

    it('draws only catalog metrics, each with a dimension set it is published with, for this environment', () => {
      for (const b of resources(s, 'AWS::CloudWatch::Dashboard')) {
        const metrics = dashboardMetrics(flatten(b.Properties.DashboardBody));
        expect(metrics.length).toBeGreaterThan(0);
        for (const m of metrics) {
          const def = catalogDef(m.namespace, m.name);
          expect({ metric: `${m.namespace} ${m.name}`, inCatalog: def !== undefined }).toEqual({
            metric: `${m.namespace} ${m.name}`,
            inCatalog: true,
          });
          const dims = [...m.dimensions].sort().join(',');
          expect({ metric: m.name, dims, published: def!.dimensions.some((set) => [...set].sort().join(',') === dims) }).toEqual({
            metric: m.name,
            dims,
            published: true,
          });
        }
        const raw = flatten(b.Properties.DashboardBody);
        expect(raw).toContain(`"Environment","${env}"`);
        expect(raw).not.toMatch(new RegExp(`"Environment","(?!${env}")`));
      }
    });
  });

  it('draws Strata/Cost and Strata/Fleet metrics the cost publisher publishes, with the dimensions it publishes them with', () => {
    const published = publisherOutput();
    const drawn = resources(dev, 'AWS::CloudWatch::Dashboard').flatMap((b) =>
      dashboardMetrics(flatten(b.Properties.DashboardBody)),
    );
    const ours = drawn.filter((m) => m.namespace === METRIC_NAMESPACES.cost || m.namespace === METRIC_NAMESPACES.fleet);
    expect(ours.length).toBeGreaterThan(0);
    for (const m of ours) {
      const key = `${m.namespace}|${m.name}|${[...m.dimensions].sort().join(',')}`;
      expect({ key, published: published.has(key) }).toEqual({ key, published: true });
    }
    // And the dashboards use every metric the publisher's namespaces define (nothing published goes unseen).
    const used = new Set(
      [
        ...referencedMetricKeys(DASHBOARDS, METRIC_NAMESPACES.cost),
        ...referencedMetricKeys(DASHBOARDS, METRIC_NAMESPACES.fleet),
      ].map((k) => METRICS[k].name),
    );
    for (const key of published) expect(used).toContain(key.split('|')[1]);
  });

  it("draws Strata/Requests metrics only from the request recorder's catalog entries (its own tests check it emits them)", () => {
    const drawn = resources(prod, 'AWS::CloudWatch::Dashboard')
      .flatMap((b) => dashboardMetrics(flatten(b.Properties.DashboardBody)))
      .filter((m) => m.namespace === METRIC_NAMESPACES.requests);
    const names = new Set(referencedMetricKeys(DASHBOARDS, METRIC_NAMESPACES.requests).map((k) => METRICS[k].name));
    expect(drawn.length).toBeGreaterThan(0);
    for (const m of drawn) expect(names).toContain(m.name);
  });

  it('splits cost per tenant by the configured tenants (plus "other"), and nodes by a SEARCH', () => {
    const cost = resources(prod, 'AWS::CloudWatch::Dashboard').find((b) => b.Properties.DashboardName === 'Strata-prod-Cost')!;
    const tenants = dashboardMetrics(flatten(cost.Properties.DashboardBody)).filter((m) => m.dimensions.includes('Tenant'));
    expect(tenants).toHaveLength(prod.config.tenants.length + 1);
    const fleet = flatten(
      resources(prod, 'AWS::CloudWatch::Dashboard').find((b) => b.Properties.DashboardName === 'Strata-prod-Fleet')!.Properties
        .DashboardBody,
    );
    expect(fleet).toContain(
      'SEARCH(\'{Strata/Fleet,Environment,Node} MetricName=\\"NodeFillPercent\\" Environment=\\"prod\\"\', \'Maximum\', 60)',
    );
  });

  it('follows the configuration: other budget shares, floor, ceiling, watermark, schedule and AWS limits give other thresholds', () => {
    const alarms = {
      hitRatioFloorPercent: 42,
      errorRateCeilingPercent: 3,
      nodeFillWatermarkPercent: 77,
      minRequestsPerPeriod: 10,
    };
    const awsLimits = { apiServerErrorRatePercent: 2, apiLatencyP90Ms: 400, functionErrorsPerPeriod: 3, hotTierUsagePercent: 60 };
    const input: EnvironmentConfigInput = {
      ...devFile,
      budgets: { monthlyUsd: 200, warningFraction: 0.5, criticalFraction: 0.9 },
      monitoring: { costPublisher: { scheduleMinutes: 5 }, alarms: { ...alarms, ...awsLimits } },
    };
    const config = loadEnvironmentConfig('dev', {}, { dev: input });
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
    const stacks = buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false });
    const t = Template.fromStack(stacks.monitoring);
    const byName = Object.fromEntries(
      Object.values(t.findResources('AWS::CloudWatch::Alarm')).map((r) => [
        (r as Resource).Properties.AlarmName,
        (r as Resource).Properties,
      ]),
    );
    expect(byName['strata-dev-projected-cost-warning']).toMatchObject({ Threshold: 100, Period: 300 });
    expect(byName['strata-dev-projected-cost-critical']).toMatchObject({ Threshold: 180, Period: 300 });
    expect(byName['strata-dev-hit-ratio']).toMatchObject({ Threshold: 42 });
    expect(byName['strata-dev-error-rate']).toMatchObject({ Threshold: 3 });
    expect(byName['strata-dev-node-fill']).toMatchObject({ Threshold: 77, Period: 300 });
    expect(JSON.stringify(byName['strata-dev-hit-ratio'])).toContain('>= 10');
    expect(byName['strata-dev-api-5xx']).toMatchObject({ Threshold: 0.02 });
    expect(byName['strata-dev-api-latency']).toMatchObject({ Threshold: 400 });
    expect(byName['strata-dev-fn-api-keys-errors']).toMatchObject({ Threshold: 3 });
    expect(byName['strata-dev-hot-storage']).toMatchObject({ Threshold: 0.6 * config.hotTier.maxDataStorageGb * 1e9 });
    expect(byName['strata-dev-hot-ecpu']).toMatchObject({ Threshold: 0.6 * config.hotTier.maxEcpuPerSecond * 60 });
    t.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(5 minutes)' });
  });
});

describe('Monitoring configuration', () => {
  const base = (over: Partial<EnvironmentConfigInput>) => environmentConfigSchema.safeParse({ ...devFile, ...over });

  it('defaults: warning at 80% and critical at 100% of the budget, 15-minute runs, 85% fill watermark, AWS-metric limits', () => {
    const { budgets: _b, monitoring: _m, ...rest } = devFile;
    const r = environmentConfigSchema.parse({ ...rest, budgets: { monthlyUsd: 10 } }) as EnvironmentConfig;
    expect(r.budgets).toMatchObject({ warningFraction: 0.8, criticalFraction: 1 });
    expect(r.monitoring).toEqual({
      costPublisher: { scheduleMinutes: 15, memoryMb: 256, timeoutSeconds: 120 },
      alarms: {
        hitRatioFloorPercent: 50,
        errorRateCeilingPercent: 5,
        minRequestsPerPeriod: 100,
        trafficPeriodMinutes: 5,
        nodeFillWatermarkPercent: 85,
        // 75: AWS's recommendation for ElastiCache Serverless usage limits (alarms.test.ts cites it).
        apiServerErrorRatePercent: 5,
        apiLatencyP90Ms: 1000,
        functionErrorsPerPeriod: 1,
        hotTierUsagePercent: 75,
      },
    });
  });

  it.each<[string, Partial<EnvironmentConfigInput>, string]>([
    [
      'warning at or above critical',
      { budgets: { monthlyUsd: 10, warningFraction: 1, criticalFraction: 1 } },
      'warningFraction (1) must be below criticalFraction (1)',
    ],
    [
      'a schedule EventBridge and the alarms cannot share',
      { monitoring: { costPublisher: { scheduleMinutes: 7 as 5 } } },
      'scheduleMinutes must be 1, 5, 10, 15, 30 or 60',
    ],
    ['a floor above 100%', { monitoring: { alarms: { hitRatioFloorPercent: 120 } } }, 'hitRatioFloorPercent'],
    ['a hot-tier alarm at the limit itself', { monitoring: { alarms: { hotTierUsagePercent: 100 } } }, 'must be below 100'],
    [
      'a latency limit API Gateway never reaches',
      { monitoring: { alarms: { apiLatencyP90Ms: 30_000 } } },
      '29 s integration timeout',
    ],
  ])('rejects %s', (_what, over, message) => {
    const r = base(over);
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain(message);
  });
});

describe('StrataAlarms construct', () => {
  const props = alarmProps;

  it.each<[string, Partial<StrataAlarmsProps>, RegExp]>([
    [
      'warning not below critical',
      { warningFraction: 1.2 },
      /warningFraction \(1.2\) must be positive and below criticalFraction/,
    ],
    ['a watermark above 100%', { nodeFillWatermarkPercent: 101 }, /nodeFillWatermarkPercent must be in \(0, 100\]/],
    ['a fractional request minimum', { minRequestsPerPeriod: 0.5 }, /minRequestsPerPeriod must be a whole number/],
    ['a non-positive budget', { budgetMonthlyUsd: 0 }, /budgetMonthlyUsd must be positive/],
  ])('fails on %s', (_what, over, message) => {
    const stack = new Stack(new App(), 'Probe');
    expect(() => new StrataAlarms(stack, 'Alarms', props(stack, over))).toThrow(InvalidPropsError);
    const stack2 = new Stack(new App(), 'Probe2');
    expect(() => new StrataAlarms(stack2, 'Alarms', props(stack2, over))).toThrow(message);
  });
});
