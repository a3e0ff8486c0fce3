import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { AssetHashType, DockerImage, RemovalPolicy, Stack, Tags, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct, type IConstruct } from 'constructs';
import { buildSync } from 'esbuild';
import { RING_KEY } from '../../layers/core/ring/store.js';
import { CACHE_NODE_V8_FLAGS } from '../../layers/core/warm/node-process.js';
import { ESM_REQUIRE_BANNER, REPO_ROOT } from '../lib/packaging.js';
import { InvalidPropsError, check, intIn } from './validation.js';

/** File name of the daemon inside the bundle. */
const MAIN = 'main.mjs';

export interface CacheNodeBundleOptions {
  /**
   * Packages that cannot be bundled (native addons, e.g. `lmdb`). They are copied, with their dependencies, from
   * {@link nativeModulesDir}, which must be a node_modules tree installed for linux-arm64. @default - none
   */
  readonly nativeModules?: readonly string[];
  /** @default `<repo>/.tools/cachenode-native/linux-arm64/node_modules` */
  readonly nativeModulesDir?: string;
}

/** Where the native modules for the cache nodes are installed by default, and how to install them. */
export const DEFAULT_NATIVE_MODULES_DIR = join(REPO_ROOT, '.tools', 'cachenode-native', 'linux-arm64', 'node_modules');

/** The command that installs `modules` (at the repository's versions) for linux-arm64 into `dir`. */
export function nativeModulesInstallCommand(modules: readonly string[], dir = DEFAULT_NATIVE_MODULES_DIR): string {
  const versioned = modules.map((m) => {
    const pkg = join(REPO_ROOT, 'node_modules', m, 'package.json');
    return existsSync(pkg) ? `${m}@${(JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version}` : m;
  });
  return `npm install --prefix ${relative(REPO_ROOT, dirname(dir)) || '.'} --no-save --no-package-lock --os=linux --cpu=arm64 --libc=glibc ${versioned.join(' ')}`;
}

/**
 * The cachenode daemon as an S3 asset: a zip holding `main.mjs` (esbuild bundle of the entry, ESM, Node 24, with a
 * source map) and, when the daemon uses native addons, their linux-arm64 `node_modules`.
 */
export abstract class CacheNodeBundle {
  /** Bundles a TypeScript/JavaScript entry point (e.g. cachenode/src/main.ts) at synth time. */
  static fromEntry(entry: string, options: CacheNodeBundleOptions = {}): CacheNodeBundle {
    return new EntryBundle(entry, options);
  }

  /** A directory that already holds `main.mjs` (and its node_modules, if any). */
  static fromDirectory(path: string): CacheNodeBundle {
    return new DirectoryBundle(path);
  }

  /** Creates the asset under `scope`. */
  abstract bind(scope: Construct): s3assets.Asset;
}

class DirectoryBundle extends CacheNodeBundle {
  constructor(private readonly path: string) {
    super();
  }

  bind(scope: Construct): s3assets.Asset {
    if (!existsSync(join(this.path, MAIN))) throw new InvalidPropsError(scope, `cache node bundle directory ${this.path} has no ${MAIN}`);
    return new s3assets.Asset(scope, 'Bundle', { path: this.path });
  }
}

class EntryBundle extends CacheNodeBundle {
  constructor(
    private readonly entry: string,
    private readonly options: CacheNodeBundleOptions,
  ) {
    super();
  }

  bind(scope: Construct): s3assets.Asset {
    const entry = this.entry;
    if (!existsSync(entry)) {
      throw new InvalidPropsError(scope, `cache node entry ${relative(REPO_ROOT, entry) || entry} does not exist: the fleet bundles the cachenode daemon from it (CacheNodeBundle.fromEntry). Point it at the daemon's entry file, or use CacheNodeBundle.fromDirectory() with a prebuilt bundle.`);
    }
    const nativeModules = this.options.nativeModules ?? [];
    const nativeDir = this.options.nativeModulesDir ?? DEFAULT_NATIVE_MODULES_DIR;
    if (nativeModules.length > 0) checkNativeModules(scope, nativeModules, nativeDir);
    return new s3assets.Asset(scope, 'Bundle', {
      path: dirname(entry),
      assetHashType: AssetHashType.OUTPUT,
      bundling: {
        // Used only if local bundling is impossible; it never is (esbuild is a dependency).
        image: DockerImage.fromRegistry('public.ecr.aws/docker/library/node:24-slim'),
        local: {
          tryBundle(outputDir: string): boolean {
            buildSync({
              entryPoints: [entry],
              outfile: join(outputDir, MAIN),
              bundle: true,
              platform: 'node',
              target: 'node24',
              format: 'esm',
              sourcemap: true,
              sourcesContent: false,
              banner: { js: ESM_REQUIRE_BANNER },
              external: [...nativeModules],
              logLevel: 'error',
            });
            writeFileSync(join(outputDir, 'package.json'), JSON.stringify({ name: 'strata-cachenode', private: true, type: 'module', main: MAIN }, null, 2) + '\n');
            if (nativeModules.length > 0) cpSync(nativeDir, join(outputDir, 'node_modules'), { recursive: true, dereference: true });
            return true;
          },
        },
      },
    });
  }
}

/** Each native module must be in the tree, with its linux-arm64 build when it ships per-platform packages. */
function checkNativeModules(scope: IConstruct, modules: readonly string[], dir: string): void {
  const fix = `Install them for the cache nodes (Graviton, linux-arm64) with:\n    ${nativeModulesInstallCommand(modules, dir)}`;
  for (const m of modules) {
    const pkgFile = join(dir, m, 'package.json');
    if (!existsSync(pkgFile)) throw new InvalidPropsError(scope, `native module '${m}' of the cache node is not in ${dir}. ${fix}`);
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { optionalDependencies?: Record<string, string> };
    const arm64 = Object.keys(pkg.optionalDependencies ?? {}).filter((d) => /linux-arm64(?!-musl)/.test(d));
    for (const d of arm64) {
      if (!existsSync(join(dir, d, 'package.json'))) throw new InvalidPropsError(scope, `${dir} lacks ${d}, the linux-arm64 build of '${m}' (it was installed for another platform). ${fix}`);
    }
  }
}

export interface DataVolumeProps {
  /** gp3 size, 1-16384 GiB. */
  readonly sizeGiB: number;
  /** 3000-80000, at most 500 per GiB. @default 3000 (the gp3 baseline, included in the price) */
  readonly iops?: number;
  /** 125-2000 MiB/s, at most 0.25 MiB/s per provisioned IOPS. @default 125 (the gp3 baseline) */
  readonly throughputMiBps?: number;
}

export interface CacheNodeFleetProps {
  /** Prefixes the launch template name (`<name>-cachenode`) and tags. */
  readonly name: string;
  readonly vpc: ec2.IVpc;
  /** Where the nodes are launched (recorded for the fleet provider; the launch template is subnet-free). */
  readonly vpcSubnets: ec2.SubnetSelection;
  /** A Graviton (arm64) type: the nodes run Amazon Linux 2023 for arm64. */
  readonly instanceType: string;
  readonly dataVolume: DataVolumeProps;
  /** The only security group allowed to reach the daemon. */
  readonly coordinatorSecurityGroup: ec2.ISecurityGroup;
  readonly bundle: CacheNodeBundle;
  /** Daemon port, 1024-65535. @default 7070 */
  readonly port?: number;
  /** Share of the data volume the daemon may fill (STRATA_NODE_CAPACITY_BYTES). @default 0.9 */
  readonly capacityRatio?: number;
  /** AL2023 Node.js package; its binary is `node-<major>`. @default 'nodejs24' */
  readonly nodePackage?: string;
  /** Of the shared secret. @default RemovalPolicy.DESTROY (nodes get the current one at boot) */
  readonly secretRemovalPolicy?: RemovalPolicy;
  /**
   * The ring store (bucket and prefix): nodes read its ring document every `pollMs` and install newer versions
   * themselves, so a node that missed a push catches up without waiting for a caller. Read-only, one object.
   */
  readonly ringStore?: { readonly bucket: s3.IBucket; readonly prefix: string; readonly pollMs?: number };
}

/** Where the data volume is mounted on a node. */
export const DATA_MOUNT = '/var/lib/strata';
/** The data volume's device name in the launch template (AL2023 links the NVMe device to it). */
const DATA_DEVICE = '/dev/sdf';

/**
 * What the warm tier's EC2 fleet provider launches: a launch template (Amazon Linux 2023 arm64, IMDSv2 only,
 * encrypted gp3 root and data volumes) whose user data installs Node from the AL2023 repository (served from S3,
 * so reachable through the S3 gateway endpoint without NAT), formats and mounts the data volume, fetches the
 * daemon bundle from its S3 asset and runs it under systemd with the shared secret read from Secrets Manager at
 * start. The instance role can read exactly that object and that secret; the security group admits only the
 * coordinators' security group, on the daemon port.
 *
 * Needs an interface endpoint for Secrets Manager in the VPC when there is no NAT
 * ({@link CacheNodeFleet.INTERFACE_ENDPOINTS}).
 */
export class CacheNodeFleet extends Construct {
  /** AWS services the nodes call that need an interface endpoint in an isolated VPC. */
  static readonly INTERFACE_ENDPOINTS: readonly ec2.InterfaceVpcEndpointAwsService[] = [ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER];

  readonly launchTemplate: ec2.LaunchTemplate;
  readonly securityGroup: ec2.SecurityGroup;
  readonly role: iam.Role;
  /** Shared secret between coordinators and nodes (cachenode refuses requests without it). */
  readonly secret: secretsmanager.Secret;
  readonly bundle: s3assets.Asset;
  readonly port: number;
  readonly vpcSubnets: ec2.SubnetSelection;

  constructor(scope: Construct, id: string, props: CacheNodeFleetProps) {
    super(scope, id);
    check(this, /^[a-z][a-z0-9-]{0,39}$/.test(props.name), `name '${props.name}' must be 1-40 characters of a-z, 0-9 and "-", starting with a letter`);
    check(this, /^[a-z]+[0-9]+g[a-z-]*\.[a-z0-9]+$/.test(props.instanceType), `instanceType '${props.instanceType}' is not a Graviton (arm64) type such as t4g.small, m7g.large or r7g.xlarge: the nodes run the arm64 AMI`);
    const v = props.dataVolume;
    const iops = v.iops ?? 3000;
    const throughput = v.throughputMiBps ?? 125;
    check(this, intIn(v.sizeGiB, 1, 16384), `dataVolume.sizeGiB must be a whole number from 1 to 16384 (got ${v.sizeGiB})`);
    check(this, intIn(iops, 3000, 80000), `dataVolume.iops must be 3000-80000 for gp3 (got ${iops})`);
    check(this, iops <= v.sizeGiB * 500 || iops === 3000, `dataVolume.iops ${iops} exceeds gp3's 500 IOPS per GiB for ${v.sizeGiB} GiB`);
    check(this, intIn(throughput, 125, 2000), `dataVolume.throughputMiBps must be 125-2000 for gp3 (got ${throughput})`);
    check(this, throughput <= iops / 4 || throughput === 125, `dataVolume.throughputMiBps ${throughput} exceeds gp3's 0.25 MiB/s per provisioned IOPS (${iops} IOPS allow ${iops / 4})`);
    this.port = props.port ?? 7070;
    check(this, intIn(this.port, 1024, 65535), `port must be 1024-65535 (got ${this.port})`);
    const capacityRatio = props.capacityRatio ?? 0.9;
    check(this, capacityRatio > 0 && capacityRatio <= 0.95, `capacityRatio must be in (0, 0.95]: the file system needs headroom (got ${capacityRatio})`);
    const nodePackage = props.nodePackage ?? 'nodejs24';
    const nodeMajor = /^nodejs(\d+)$/.exec(nodePackage)?.[1];
    check(this, nodeMajor !== undefined && Number(nodeMajor) >= 22, `nodePackage '${nodePackage}' must be an AL2023 namespaced Node.js package, nodejs22 or later (e.g. nodejs24)`);
    this.vpcSubnets = props.vpcSubnets;

    this.bundle = props.bundle.bind(this);

    this.securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: `Strata cache nodes (${props.name}): daemon port from the coordinators only`,
      allowAllOutbound: false,
    });
    // Isolated subnets route only to the VPC endpoints, so 443 reaches S3 (bundle, AL2023 packages) and Secrets Manager.
    this.securityGroup.addEgressRule(ec2.Peer.anyIpv4(), ec2.Port.tcp(443), 'HTTPS to S3 (gateway endpoint) and Secrets Manager (interface endpoint)');
    // Ingress on the nodes' group and egress on the coordinators' group, both for the daemon port only; both rules
    // live with the nodes' group (the coordinators' group is older and must not depend on the fleet).
    this.securityGroup.connections.allowFrom(props.coordinatorSecurityGroup, ec2.Port.tcp(this.port), 'cachenode daemon from the coordinators');

    this.secret = new secretsmanager.Secret(this, 'SharedSecret', {
      description: `Shared secret between Strata coordinators and cache nodes (${props.name})`,
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
      removalPolicy: props.secretRemovalPolicy ?? RemovalPolicy.DESTROY,
    });
    Validations.of(this.secret).acknowledge(
      { id: 'AwsSolutions-SMG4', reason: 'Nodes read the secret at daemon start; rotating it needs a coordinated restart of the fleet, which belongs to the fleet workflows (later issue). It only gates requests that the security group already limits to the coordinators.' },
    );

    this.role = new iam.Role(this, 'Role', { assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'), description: `Strata cache node (${props.name})` });
    this.role.addToPolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [this.bundle.bucket.arnForObjects(this.bundle.s3ObjectKey)] }));
    if (props.ringStore) this.role.addToPolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [props.ringStore.bucket.arnForObjects(`${props.ringStore.prefix}/${RING_KEY}`)] }));
    this.role.addToPolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [this.secret.secretArn] }));

    const region = Stack.of(this).region;
    const capacityBytes = Math.floor(v.sizeGiB * 1024 ** 3 * capacityRatio);
    const userData = ec2.UserData.forLinux({ shebang: '#!/bin/bash' });
    userData.addCommands(
      'set -euo pipefail',
      `# Node.js and unzip from the AL2023 repository (hosted on S3: reachable through the S3 gateway endpoint)`,
      `dnf install -y ${nodePackage} unzip`,
      '# Data volume: format on first boot only, mount by label',
      `for i in $(seq 1 60); do [ -e ${DATA_DEVICE} ] && break; sleep 1; done`,
      `if ! blkid ${DATA_DEVICE} >/dev/null 2>&1; then mkfs.xfs -L strata-data ${DATA_DEVICE}; fi`,
      `mkdir -p ${DATA_MOUNT}`,
      `grep -q 'LABEL=strata-data' /etc/fstab || echo 'LABEL=strata-data ${DATA_MOUNT} xfs defaults,noatime,nofail 0 2' >> /etc/fstab`,
      'mount -a',
      `id strata >/dev/null 2>&1 || useradd --system --home-dir ${DATA_MOUNT} --shell /sbin/nologin strata`,
      `chown strata:strata ${DATA_MOUNT}`,
      '# Daemon bundle',
    );
    const zip = userData.addS3DownloadCommand({ bucket: this.bundle.bucket, bucketKey: this.bundle.s3ObjectKey, localFile: '/opt/strata/cachenode.zip', region });
    const envFile = [
      `STRATA_NODE_PORT=${this.port}`,
      `STRATA_NODE_DATA_DIR=${DATA_MOUNT}`,
      `STRATA_NODE_CAPACITY_BYTES=${capacityBytes}`,
      'STRATA_NODE_SECRET_FILE=/run/strata/node-secret',
      `AWS_REGION=${region}`,
      ...(props.ringStore ? [`STRATA_NODE_RING_STORE=s3://${props.ringStore.bucket.bucketName}/${props.ringStore.prefix}`, `STRATA_NODE_RING_POLL_MS=${props.ringStore.pollMs ?? 5000}`] : []),
    ];
    userData.addCommands(
      `rm -rf /opt/strata/cachenode && mkdir -p /opt/strata/cachenode && unzip -q ${zip} -d /opt/strata/cachenode`,
      'TOKEN=$(curl -sS -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 60")',
      'INSTANCE_ID=$(curl -sS -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/instance-id)',
      'mkdir -p /etc/strata',
      `cat > /etc/strata/cachenode.env <<EOF\n${envFile.join('\n')}\nSTRATA_NODE_ID=$INSTANCE_ID\nEOF`,
      'mkdir -p /usr/local/libexec',
      `cat > /usr/local/libexec/strata-node-secret <<'EOF'\n#!/bin/bash\n# Runs as root before the daemon: the secret goes to a tmpfs file only the daemon's user can read.\nset -euo pipefail\numask 077\naws secretsmanager get-secret-value --region ${region} --secret-id "$1" --query SecretString --output text > /run/strata/node-secret\nchown strata:strata /run/strata/node-secret\nEOF`,
      'chmod 0755 /usr/local/libexec/strata-node-secret',
      `cat > /etc/systemd/system/strata-cachenode.service <<'EOF'\n${systemdUnit(`/usr/bin/node-${nodeMajor}`, this.secret.secretArn)}\nEOF`,
      'systemctl daemon-reload',
      'systemctl enable --now strata-cachenode.service',
    );

    this.launchTemplate = new ec2.LaunchTemplate(this, 'LaunchTemplate', {
      launchTemplateName: `${props.name}-cachenode`,
      versionDescription: 'Strata cache node',
      machineImage: ec2.MachineImage.latestAmazonLinux2023({ cpuType: ec2.AmazonLinuxCpuType.ARM_64 }),
      instanceType: new ec2.InstanceType(props.instanceType),
      securityGroup: this.securityGroup,
      role: this.role,
      userData,
      requireImdsv2: true,
      httpPutResponseHopLimit: 1,
      associatePublicIpAddress: false,
      ebsOptimized: true,
      detailedMonitoring: false,
      instanceInitiatedShutdownBehavior: ec2.InstanceInitiatedShutdownBehavior.TERMINATE,
      blockDevices: [
        { deviceName: '/dev/xvda', volume: ec2.BlockDeviceVolume.ebs(10, { volumeType: ec2.EbsDeviceVolumeType.GP3, encrypted: true, deleteOnTermination: true }) },
        {
          deviceName: DATA_DEVICE,
          volume: ec2.BlockDeviceVolume.ebs(v.sizeGiB, { volumeType: ec2.EbsDeviceVolumeType.GP3, iops, throughput, encrypted: true, deleteOnTermination: true }),
        },
      ],
    });
    Tags.of(this.launchTemplate).add('strata:role', 'cachenode');
  }
}

function systemdUnit(node: string, secretArn: string): string {
  return [
    '[Unit]',
    'Description=Strata cache node',
    'Wants=network-online.target',
    'After=network-online.target',
    `RequiresMountsFor=${DATA_MOUNT}`,
    '',
    '[Service]',
    'User=strata',
    'Group=strata',
    'EnvironmentFile=/etc/strata/cachenode.env',
    'RuntimeDirectory=strata',
    'RuntimeDirectoryMode=0700',
    `ExecStartPre=+/usr/local/libexec/strata-node-secret ${secretArn}`,
    `ExecStart=${node} ${CACHE_NODE_V8_FLAGS.join(' ')} --enable-source-maps /opt/strata/cachenode/${MAIN}`,
    'Restart=always',
    'RestartSec=2',
    // 2: bad configuration, 3: a data directory the node cannot use. Restarting does not fix either.
    'RestartPreventExitStatus=2 3',
    'TimeoutStopSec=30',
    'LimitNOFILE=65536',
    'NoNewPrivileges=yes',
    'ProtectSystem=strict',
    'ProtectHome=yes',
    'PrivateTmp=yes',
    `ReadWritePaths=${DATA_MOUNT}`,
    '',
    '[Install]',
    'WantedBy=multi-user.target',
  ].join('\n');
}
