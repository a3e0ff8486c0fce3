/**
 * CDK app entry (cdk/cdk.json): one environment per synth, chosen with `-c env=<dev|staging|prod>`.
 * Prefer `npm run synth -- --env dev` / `npm run deploy -- --env dev` (cdk/bin/cli.ts), which pass the context.
 */
import { App } from 'aws-cdk-lib';
import { buildStrataApp } from '../app.js';
import { ConfigurationError, loadEnvironmentConfig } from '../config/load.js';

const app = new App();
try {
  const config = loadEnvironmentConfig(app.node.tryGetContext('env'), {
    context: { account: app.node.tryGetContext('account'), region: app.node.tryGetContext('region'), availabilityZones: app.node.tryGetContext('availabilityZones') },
    env: process.env,
  });
  buildStrataApp(app, { config });
  app.synth();
} catch (e) {
  if (e instanceof ConfigurationError || (e instanceof Error && e.name === 'InvalidPropsError')) {
    console.error(`\n${e.message}\n`);
    process.exit(1);
  }
  throw e;
}
