/**
 * What a deployed environment costs while idle (no requests, empty tiers, no cache node running), computed from
 * the synthesized templates: every billed resource is counted where CloudFormation would create it, so a stack
 * change that adds an endpoint, a secret or an alarm changes the figure, and the README's table is checked
 * against it (test/infra/idle-cost.test.ts). Derived from list prices, not measured on an account.
 */
import { priceBook } from '../../core/cost/model/price-catalog.js';
import { resolveIntrinsics } from './workflow-definitions.js';
import { monitoringUsage, trafficSeries } from '../../core/cost/publisher/publish-cost.js';

/** Prices the catalog (core/cost/catalogs) does not carry; us-east-1 list prices, 2026-11. */
export const OTHER_PRICES = {
  /** https://aws.amazon.com/privatelink/pricing/: interface endpoint, per AZ (subnet) and hour. */
  interfaceEndpointPerAzHour: 0.01,
  /** https://aws.amazon.com/secrets-manager/pricing/: per secret and month. */
  secretPerMonth: 0.4,
  /** https://aws.amazon.com/kms/pricing/: per customer-managed key and month. */
  kmsKeyPerMonth: 1,
  /** https://aws.amazon.com/vpc/pricing/: NAT gateway per hour (data processing extra). */
  natGatewayPerHour: 0.045,
  /** https://aws.amazon.com/cloudwatch/pricing/: dashboards beyond the account's first 3 (up to 50 metrics). */
  dashboardPerMonth: 3,
  freeDashboards: 3,
  /**
   * https://aws.amazon.com/step-functions/pricing/: Express workflows, $1.00 per million requests (executions started)
   * and $0.06 per GB-hour of duration (the first 1,000 GB-hours a month; later tiers are cheaper), the duration
   * rounded up to 100 ms and the memory billed in 64 MB chunks (50 MB plus the definition and the payload: 64 MB).
   */
  expressPerMillionRequests: 1,
  expressPerGBHour: 0.06,
  expressBilledMemoryMb: 64,
} as const;

/**
 * What the policy ticker (cdk/constructs/policy-ticker.ts) does per execution while idle: the default policy has no
 * background timer under a minute, so each minute's execution invokes the evaluator once (~200 ms) and ends (~1 s
 * in all). Estimates, not measurements.
 */
export const TICKER_IDLE = { invocationsPerExecution: 1, executionSeconds: 1, invocationSeconds: 0.2 } as const;

interface Resource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}

/** A synthesized template as JSON (Template#toJSON()). */
export interface TemplateJson {
  readonly Resources?: Readonly<Record<string, Resource>>;
}

export interface IdleCostLine {
  /** Stable id of the line (the README table's rows are matched on it). */
  readonly id: 'hot' | 'endpoints' | 'secrets' | 'kms' | 'nat' | 'metrics' | 'alarms' | 'dashboards' | 'ticker';
  readonly usdPerMonth: number;
  /** How the figure was derived, for the README. */
  readonly detail: string;
}

export interface IdleCostInput {
  readonly templates: readonly TemplateJson[];
  /** Tenants of the environment: the cost publisher publishes a series per tenant (and one for the rest). */
  readonly tenants: number;
  readonly region?: string;
}

const round2 = (usd: number): number => Math.round(usd * 100) / 100;

/** The idle bill, line by line (zero lines included, so a table can show them). */
export function idleCost(input: IdleCostInput): IdleCostLine[] {
  const book = priceBook(undefined, input.region ?? 'us-east-1');
  const hours = book.hoursPerMonth;
  const resources = input.templates.flatMap((t) => Object.values(t.Resources ?? {}));
  const ofType = (type: string) => resources.filter((r) => r.Type === type);

  const serverless = book.prices.elasticache?.serverless;
  const caches = ofType('AWS::ElastiCache::ServerlessCache').length;
  const hot = serverless ? caches * serverless.minGB * serverless.perGBHour * hours : 0;

  const endpointAzHours = ofType('AWS::EC2::VPCEndpoint')
    .filter((r) => r.Properties?.VpcEndpointType === 'Interface')
    .reduce((n, r) => n + ((r.Properties?.SubnetIds as unknown[] | undefined)?.length ?? 0), 0);
  const secrets = ofType('AWS::SecretsManager::Secret').length;
  const kmsKeys = ofType('AWS::KMS::Key').length;
  const nats = ofType('AWS::EC2::NatGateway').length;

  const alarmMetrics = ofType('AWS::CloudWatch::Alarm').reduce((n, r) => n + alarmMetricCount(r), 0);
  const cw = book.prices.cloudWatch;
  const customMetrics = idleCustomMetrics(input.tenants);
  const dashboards = ofType('AWS::CloudWatch::Dashboard').length;
  const ticker = input.templates.flatMap((t) => scheduledExpressMachines(t, hours));
  const tickerUsd = ticker.reduce(
    (usd, m) =>
      usd +
      tickerMonthlyCost(book, {
        executionsPerMonth: m.executionsPerMonth,
        memoryMb: m.memoryMb,
        functions: m.functions,
        ...TICKER_IDLE,
      }).total,
    0,
  );
  const tickerExecutions = ticker.reduce((n, m) => n + m.executionsPerMonth, 0);

  return [
    {
      id: 'hot',
      usdPerMonth: round2(hot),
      detail: `${caches} ElastiCache Serverless cache(s) at the ${serverless?.minGB ?? 0} GB minimum × $${serverless?.perGBHour ?? 0}/GB-hour`,
    },
    {
      id: 'endpoints',
      usdPerMonth: round2(endpointAzHours * OTHER_PRICES.interfaceEndpointPerAzHour * hours),
      detail: `${endpointAzHours} interface endpoint AZ(s) × $${OTHER_PRICES.interfaceEndpointPerAzHour}/hour`,
    },
    {
      id: 'secrets',
      usdPerMonth: round2(secrets * OTHER_PRICES.secretPerMonth),
      detail: `${secrets} Secrets Manager secret(s) × $${OTHER_PRICES.secretPerMonth}`,
    },
    {
      id: 'kms',
      usdPerMonth: round2(kmsKeys * OTHER_PRICES.kmsKeyPerMonth),
      detail: `${kmsKeys} customer-managed KMS key(s) × $${OTHER_PRICES.kmsKeyPerMonth}`,
    },
    {
      id: 'nat',
      usdPerMonth: round2(nats * OTHER_PRICES.natGatewayPerHour * hours),
      detail: `${nats} NAT gateway(s) × $${OTHER_PRICES.natGatewayPerHour}/hour`,
    },
    {
      id: 'metrics',
      usdPerMonth: round2(customMetrics * (cw?.customMetricPerMonth ?? 0)),
      detail: `${customMetrics} custom metrics the cost publisher writes with no traffic × $${cw?.customMetricPerMonth ?? 0}`,
    },
    {
      id: 'alarms',
      usdPerMonth: round2(alarmMetrics * (cw?.alarmStandardPerMonth ?? 0)),
      detail: `${alarmMetrics} alarm metrics × $${cw?.alarmStandardPerMonth ?? 0}`,
    },
    {
      id: 'dashboards',
      usdPerMonth: round2(Math.max(0, dashboards - OTHER_PRICES.freeDashboards) * OTHER_PRICES.dashboardPerMonth),
      detail: `${dashboards} dashboard(s), the account's first ${OTHER_PRICES.freeDashboards} free`,
    },
    {
      id: 'ticker',
      usdPerMonth: round2(tickerUsd),
      detail:
        `${tickerExecutions.toLocaleString('en-US')} Express executions a month of ~${TICKER_IDLE.executionSeconds} s, ` +
        `each invoking its functions (flush and evaluator) ${TICKER_IDLE.invocationsPerExecution}× for ` +
        `~${TICKER_IDLE.invocationSeconds * 1000} ms (${ticker.map((m) => `${m.memoryMb} MB in all`).join(', ') || 'none deployed'})`,
    },
  ];
}

/** What a ticker does in a month: executions, their length, and the evaluator invocations of each. */
export interface TickerUsage {
  readonly executionsPerMonth: number;
  /** Duration of one execution (billed rounded up to 100 ms). */
  readonly executionSeconds: number;
  readonly invocationsPerExecution: number;
  readonly invocationSeconds: number;
  /** The memory of the functions each tick invokes, added up. */
  readonly memoryMb: number;
  /** How many functions each tick invokes (each is a Lambda request). @default 1 */
  readonly functions?: number;
}

/** A ticker's monthly bill: Express requests and duration, Lambda requests and duration (arm64), list prices. */
export function tickerMonthlyCost(
  book: ReturnType<typeof priceBook>,
  u: TickerUsage,
): { express: number; lambda: number; total: number; invocations: number } {
  const lambda = book.prices.lambda;
  const billedSeconds = Math.ceil(u.executionSeconds * 10) / 10;
  const express =
    (u.executionsPerMonth * OTHER_PRICES.expressPerMillionRequests) / 1e6 +
    (u.executionsPerMonth * billedSeconds * (OTHER_PRICES.expressBilledMemoryMb / 1024) * OTHER_PRICES.expressPerGBHour) / 3600;
  const invocations = u.executionsPerMonth * u.invocationsPerExecution * (u.functions ?? 1);
  const lambdaUsd = lambda
    ? (invocations * lambda.requests.usd) / lambda.requests.per +
      u.executionsPerMonth * u.invocationsPerExecution * u.invocationSeconds * (u.memoryMb / 1024) * lambda.perGBSecondArm64
    : 0;
  return { express, lambda: lambdaUsd, total: express + lambdaUsd, invocations };
}

/**
 * The Express state machines a schedule starts (AWS::Events::Rule `rate(N minute[s])` targeting it), with their
 * executions a month and the memory of the Lambda function their definition invokes.
 */
function scheduledExpressMachines(
  t: TemplateJson,
  hours: number,
): { executionsPerMonth: number; memoryMb: number; functions: number }[] {
  const resources = t.Resources ?? {};
  const out: { executionsPerMonth: number; memoryMb: number; functions: number }[] = [];
  for (const [id, r] of Object.entries(resources)) {
    if (r.Type !== 'AWS::StepFunctions::StateMachine' || r.Properties?.StateMachineType !== 'EXPRESS') continue;
    let perHour = 0;
    for (const rule of Object.values(resources)) {
      if (rule.Type !== 'AWS::Events::Rule') continue;
      const m = /^rate\((\d+) minutes?\)$/.exec(String(rule.Properties?.ScheduleExpression ?? ''));
      const targets = (rule.Properties?.Targets ?? []) as { Arn?: unknown }[];
      if (m && targets.some((x) => JSON.stringify(x.Arn) === JSON.stringify({ Ref: id }))) perHour += 60 / Number(m[1]);
    }
    if (perHour === 0) continue;
    // Each tick invokes every function its tasks call synchronously (the flush and the evaluator, side by side), not
    // one it starts asynchronously (InvocationType Event: the job runner), which runs only when a job waits.
    const called = syncInvokedFunctions(JSON.parse(String(resolveIntrinsics(r.Properties?.DefinitionString ?? '{}'))));
    const invoked = Object.entries(resources).filter(
      ([fnId, fn]) => fn.Type === 'AWS::Lambda::Function' && called.some((arn) => arn.endsWith(`:function:${fnId}`)),
    );
    const memoryMb = invoked.reduce((sum, [, fn]) => sum + Number(fn.Properties?.MemorySize ?? 128), 0);
    out.push({ executionsPerMonth: Math.round(perHour * hours), memoryMb, functions: invoked.length });
  }
  return out;
}

/** The function ARNs an ASL definition's Task states invoke synchronously (Parallel branches included). */
function syncInvokedFunctions(definition: { States?: Record<string, unknown> }): string[] {
  const out: string[] = [];
  for (const st of Object.values(definition.States ?? {}) as Record<string, unknown>[]) {
    if (st.Type === 'Parallel')
      for (const b of st.Branches as { States?: Record<string, unknown> }[]) out.push(...syncInvokedFunctions(b));
    if (st.Type !== 'Task') continue;
    const resource = String(st.Resource);
    const params = (st.Parameters ?? {}) as Record<string, unknown>;
    if (resource.includes(':function:')) out.push(resource);
    else if (resource.includes(':states:::lambda:invoke') && params.InvocationType !== 'Event')
      out.push(String(params.FunctionName));
  }
  return out;
}

/** {@link idleCost} of one synthesized environment: its stacks' templates and its configuration. */
export function idleCostOf(env: {
  readonly templates: Readonly<Record<string, { toJSON(): unknown }>>;
  readonly config: { readonly tenants: readonly unknown[]; readonly region: string };
}): IdleCostLine[] {
  const templates = Object.values(env.templates).map((t) => t.toJSON() as TemplateJson);
  return idleCost({ templates, tenants: env.config.tenants.length, region: env.config.region });
}

/** Sum of the lines. */
export function idleTotal(lines: readonly IdleCostLine[]): number {
  return round2(lines.reduce((a, l) => a + l.usdPerMonth, 0));
}

/** A standard alarm is billed per metric it reads: one, or each MetricStat of a metric-math alarm. */
function alarmMetricCount(alarm: Resource): number {
  const metrics = alarm.Properties?.Metrics as { MetricStat?: unknown }[] | undefined;
  return metrics ? metrics.filter((m) => m.MetricStat !== undefined).length : 1;
}

/**
 * The series the cost publisher writes on an idle run (no nodes, no traffic), as it bills them to itself: no
 * CostPer1000Hits (no hits) and no `other` tenant (no unmapped traffic) unless no tenant is configured; the spot
 * figures (SpotSavingsMonthly, SpotNodes) are written as 0.
 */
function idleCustomMetrics(tenants: number): number {
  const settings = {
    tenants: Array.from({ length: tenants }, (_, i) => ({ name: `t${i}`, namespaces: [] })),
    monitoring: { dashboards: 0, alarmMetrics: 0, runsPerHour: 1 },
  };
  const usage = monitoringUsage(
    settings as unknown as Parameters<typeof monitoringUsage>[0],
    { environment: 'x', namespaces: [], functions: [] },
    0,
    trafficSeries({ hits: 0, namespaces: [] }, tenants),
  );
  return usage.customMetrics;
}

const LABELS: Readonly<Record<IdleCostLine['id'], string>> = {
  hot: 'ElastiCache Serverless, storage minimum (0.1 GB × $0.084 × 730 h)',
  endpoints: 'VPC interface endpoints ($0.01 per AZ-hour)',
  secrets: 'Secrets Manager secrets ($0.40 each)',
  kms: 'customer-managed KMS key ($1 each)',
  nat: 'NAT gateways ($0.045 per hour)',
  metrics: 'custom metrics the cost publisher writes with no traffic ($0.30 each)',
  alarms: 'alarm metrics ($0.10 each; a metric-math alarm counts each metric it reads)',
  dashboards: "dashboards beyond the account's 3 free ones ($3 each)",
  ticker:
    'policy ticker: Express executions a minute ($1 per million, $0.06 per GB-hour, ~1 s at 64 MB), each invoking the write-back flush and the evaluator once (Lambda arm64, ~200 ms at 256 MB each)',
};

/** Rows priced at (about) zero when idle, listed so the table is complete: [item, the same figure everywhere]. */
const FREE_ROWS: readonly (readonly [string, string])[] = [
  ['scheduled Lambdas (cost publisher; scale trigger, EvictToS3 schedule: without the evaluator), idle VPC logs', '< $0.10'],
  ['VPC, subnets, S3 gateway endpoint, security groups, API Gateway, API keys, Lambda, SNS, empty buckets', '$0'],
];

/** The README's idle-cost table (markdown), one column per environment. */
export function renderIdleCostTable(perEnv: Readonly<Record<string, readonly IdleCostLine[]>>): string {
  const envs = Object.keys(perEnv);
  const usd = (n: number) => `$${n.toFixed(2)}`;
  const counted = (id: IdleCostLine['id']) => envs.map((e) => perEnv[e]!.find((l) => l.id === id)!);
  const rows = (Object.keys(LABELS) as IdleCostLine['id'][]).map((id) => {
    const cells = counted(id).map((l) => `${usd(l.usdPerMonth)} (${l.detail.split(' ')[0]})`);
    return `| ${LABELS[id]} | ${cells.join(' | ')} |`;
  });
  const free = FREE_ROWS.map(([item, usdText]) => `| ${item} | ${envs.map(() => usdText).join(' | ')} |`);
  const total = `| **idle total per month** | ${envs.map((e) => `**${usd(idleTotal(perEnv[e]!))}**`).join(' | ')} |`;
  return [
    `| item (count in brackets) | ${envs.join(' | ')} |`,
    `|---|${envs.map(() => '---|').join('')}`,
    ...rows,
    ...free,
    total,
  ].join('\n');
}

/** Where the generated table sits in README.md. */
export const README_MARKERS = [
  '<!-- idle-cost:begin (generated: bash scripts/run-node.sh scripts/idle-cost.ts --write) -->',
  '<!-- idle-cost:end -->',
] as const;

/** README.md with `table` between the markers. */
export function withTable(readme: string, table: string): string {
  const [begin, end] = README_MARKERS;
  const i = readme.indexOf(begin);
  const j = readme.indexOf(end);
  if (i < 0 || j < i) throw new Error(`README.md lacks the idle-cost markers ${begin} … ${end}`);
  return `${readme.slice(0, i + begin.length)}\n${table}\n${readme.slice(j)}`;
}
