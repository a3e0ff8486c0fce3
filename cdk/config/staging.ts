import type { EnvironmentConfigInput } from './schema.js';

/** Staging: prod's topology (3 AZs, customer-managed key, retained data) at a fraction of its limits. */
export const staging: EnvironmentConfigInput = {
  name: 'staging',
  region: 'us-east-1',
  availabilityZones: ['us-east-1a', 'us-east-1b', 'us-east-1c'],
  removalPolicy: 'retain',
  logRetentionDays: 30,
  network: { cidr: '10.41.0.0/16', natGateways: 0, flowLogTraffic: 'ALL' },
  hotTier: {
    maxDataStorageGb: 5,
    maxEcpuPerSecond: 50_000,
    snapshotRetentionDays: 1,
    dailySnapshotTime: '05:00',
    encryptionKey: 'customer-managed',
  },
  coldTier: { prefix: 'v1' },
  fleet: { instanceType: 'r7g.medium', dataVolume: { sizeGiB: 100 } },
  api: {
    throttle: { rateLimit: 500, burstLimit: 1000 },
    functions: {
      keys: { memoryMb: 1024 },
      batch: { memoryMb: 1536 },
      transfer: { memoryMb: 512, nearCacheMb: 0 },
      service: { memoryMb: 256, nearCacheMb: 0 },
    },
    executionLogging: 'ERROR',
  },
  tenants: [{ name: 'qa', namespaces: ['qa', 'load-test'], throttle: { rateLimit: 200, burstLimit: 400 } }],
  budgets: { monthlyUsd: 150, warningFraction: 0.8, criticalFraction: 1 },
  monitoring: { costPublisher: { scheduleMinutes: 15 }, alarms: { hitRatioFloorPercent: 50, errorRateCeilingPercent: 5 } },
};
