/**
 * CDK app entry (cdk/cdk.json): one environment per synth, chosen with `-c env=<dev|staging|prod>`.
 * Prefer `npm run synth -- --env dev` / `npm run deploy -- --env dev` (cdk/bin/cli.ts), which pass the context.
 * Staging and prod also need an alarm destination: `-c alarmEmails=a@x.org,b@y.org` or `-c alarmTopicArn=arn:aws:sns:...`
 * (or STRATA_ALARM_EMAILS / STRATA_ALARM_TOPIC_ARN); see cdk/config/load.ts.
 */
import { App } from 'aws-cdk-lib';
import { buildStrataApp } from '../app.js';
import { CONTEXT_KEYS, ConfigurationError, loadEnvironmentConfig } from '../config/load.js';

const app = new App();
try {
  const config = loadEnvironmentConfig(app.node.tryGetContext('env'), {
    context: Object.fromEntries(CONTEXT_KEYS.map((k) => [k, app.node.tryGetContext(k)])),
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
