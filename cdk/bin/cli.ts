/**
 * `npm run synth -- --env <dev|staging|prod> [cdk options]` and `npm run deploy -- --env <env> [cdk options]`
 * (also diff, destroy, ls: `bash scripts/run-node.sh cdk/bin/cli.ts <command> --env <env>`):
 * runs the pinned CDK CLI on the app in cdk/ for one environment (all of its stacks), passing the environment as
 * context. Other arguments go to the CDK CLI unchanged, e.g. `-c account=123456789012`, `--profile x`,
 * `--require-approval never`; stack names (`Strata-dev-Api`, globs allowed) limit it to those stacks.
 * Where alarms go is given here too, never committed: `-c alarmEmails=a@x.org,b@y.org` or `-c alarmTopicArn=arn:...`
 * (or STRATA_ALARM_EMAILS / STRATA_ALARM_TOPIC_ARN); staging and prod stop here, saying so, without one.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { CONTEXT_KEYS, ConfigurationError, isEnvironmentName, loadEnvironmentConfig } from '../config/load.js';
import { ENVIRONMENT_NAMES } from '../config/schema.js';
import { REPO_ROOT } from '../lib/packaging.js';

const COMMANDS = ['synth', 'deploy', 'diff', 'destroy', 'ls'] as const;

function usage(message: string): never {
  console.error(
    `${message}\nusage: npm run <synth|deploy> -- --env <${ENVIRONMENT_NAMES.join('|')}> [cdk options]\n       bash scripts/run-node.sh cdk/bin/cli.ts <${COMMANDS.join('|')}> --env <env> [cdk options]`,
  );
  process.exit(2);
}

const [command, ...rest] = process.argv.slice(2);
if (!command || !(COMMANDS as readonly string[]).includes(command)) usage(`unknown command '${command ?? ''}'`);
const passThrough: string[] = [];
let env: string | undefined;
for (let i = 0; i < rest.length; i++) {
  const a = rest[i]!;
  if (a === '--env') env = rest[++i];
  else if (a.startsWith('--env=')) env = a.slice('--env='.length);
  else passThrough.push(a);
}
if (!isEnvironmentName(env)) usage(env === undefined ? 'missing --env' : `unknown environment '${env}'`);

// Fail fast, before the CLI starts, on a configuration the app would reject.
const contextArg = (key: string): string | undefined => {
  for (let i = 0; i < passThrough.length; i++) {
    const a = passThrough[i]!;
    const value = a === '-c' || a === '--context' ? passThrough[i + 1] : a.startsWith('--context=') ? a.slice(10) : undefined;
    if (value?.startsWith(`${key}=`)) return value.slice(key.length + 1);
  }
  return undefined;
};
try {
  loadEnvironmentConfig(env, { context: Object.fromEntries(CONTEXT_KEYS.map((k) => [k, contextArg(k)])), env: process.env });
} catch (e) {
  if (e instanceof ConfigurationError) usage(e.message);
  throw e;
}

// Stack names (Strata-<env>-<Concern>, globs allowed) limit the command; without any, it covers all stacks.
const namesStacks = passThrough.some((a) => a.startsWith('Strata-'));
const args = [
  join(REPO_ROOT, 'node_modules', 'aws-cdk', 'bin', 'cdk'),
  command,
  '-c',
  `env=${env}`,
  ...(namesStacks || command === 'ls' || command === 'synth' ? [] : ['--all']),
  ...passThrough,
];
const result = spawnSync(process.execPath, args, { cwd: join(REPO_ROOT, 'cdk'), stdio: 'inherit', env: process.env });
process.exit(result.status ?? 1);
