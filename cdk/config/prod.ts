import type { EnvironmentConfigInput } from './schema.js';

/** Production: 3 AZs, snapshots, customer-managed key, retained data; tenants are examples to replace. */
export const prod: EnvironmentConfigInput = {
  name: 'prod',
  region: 'us-east-1',
  availabilityZones: ['us-east-1a', 'us-east-1b', 'us-east-1c'],
  removalPolicy: 'retain',
  logRetentionDays: 90,
  network: { cidr: '10.42.0.0/16', natGateways: 0, flowLogTraffic: 'ALL' },
  hotTier: {
    maxDataStorageGb: 50,
    maxEcpuPerSecond: 500_000,
    snapshotRetentionDays: 7,
    dailySnapshotTime: '05:00',
    encryptionKey: 'customer-managed',
  },
  coldTier: { prefix: 'v1', accessLogExpirationDays: 365 },
  fleet: { instanceType: 'r7g.large', dataVolume: { sizeGiB: 500, iops: 6000, throughputMiBps: 250 } },
  api: {
    throttle: { rateLimit: 2000, burstLimit: 4000 },
    // Reserved concurrency caps the API at 560 of the account's 1,000 and holds 20 for the workflow steps.
    functions: {
      keys: { memoryMb: 1769, nearCacheMb: 256, reservedConcurrency: 300 },
      batch: { memoryMb: 1769, nearCacheMb: 256, reservedConcurrency: 100 },
      transfer: { memoryMb: 512, nearCacheMb: 0, reservedConcurrency: 100 },
      service: { memoryMb: 256, nearCacheMb: 0, reservedConcurrency: 50 },
      admin: { reservedConcurrency: 10 },
    },
    executionLogging: 'ERROR',
  },
  tenants: [
    { name: 'web', namespaces: ['web-sessions', 'web-pages'], throttle: { rateLimit: 1000, burstLimit: 2000 } },
    {
      name: 'analytics',
      namespaces: ['reports'],
      throttle: { rateLimit: 200, burstLimit: 400 },
      quota: { limit: 5_000_000, period: 'DAY' },
    },
  ],
  budgets: { monthlyUsd: 1000, warningFraction: 0.8, criticalFraction: 1 },
  monitoring: {
    costPublisher: { scheduleMinutes: 5 },
    alarms: { hitRatioFloorPercent: 70, errorRateCeilingPercent: 2, minRequestsPerPeriod: 500 },
  },
  workflows: { stepReservedConcurrency: 20 },
};
