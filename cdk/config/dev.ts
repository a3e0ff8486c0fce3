import type { EnvironmentConfigInput } from './schema.js';

/** Development: smallest limits, one interface-endpoint AZ, data deleted with the stack. */
export const dev: EnvironmentConfigInput = {
  name: 'dev',
  region: 'us-east-1',
  availabilityZones: ['us-east-1a', 'us-east-1b'],
  removalPolicy: 'destroy',
  logRetentionDays: 14,
  network: { cidr: '10.40.0.0/16', natGateways: 0, flowLogTraffic: 'REJECT', interfaceEndpointAzs: 1 },
  hotTier: { maxDataStorageGb: 1, maxEcpuPerSecond: 5000 },
  coldTier: { prefix: 'v1' },
  fleet: { instanceType: 't4g.small', dataVolume: { sizeGiB: 20 } },
  api: {
    throttle: { rateLimit: 100, burstLimit: 200 },
    functions: {
      keys: { memoryMb: 1024 },
      batch: { memoryMb: 1024 },
      transfer: { memoryMb: 512, nearCacheMb: 0 },
      service: { memoryMb: 256, nearCacheMb: 0 },
    },
  },
  tenants: [{ name: 'developers', namespaces: ['demo', 'test'], throttle: { rateLimit: 50, burstLimit: 100 } }],
  budgets: { monthlyUsd: 50, warningFraction: 0.8, criticalFraction: 1 },
  monitoring: { costPublisher: { scheduleMinutes: 15 }, alarms: { hitRatioFloorPercent: 30, errorRateCeilingPercent: 10 } },
};
