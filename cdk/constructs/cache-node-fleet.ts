import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { AssetHashType, DockerImage, Stack, Tags } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';
import { Construct, type IConstruct } from 'constructs';
import { buildSync } from 'esbuild';
import { FLEET_SECRET_KEY, nodeStatsKey } from '../../core/ring/node-reports.js';
import { RING_KEY } from '../../core/ring/store.js';
import { CACHE_NODE_V8_FLAGS } from '../../core/nodes/node-process.js';
import { FLEET_TAG } from '../../core/nodes/ec2-fleet.js';
import { GRAVITON_INSTANCE_TYPE, fleetCapacityIssues } from '../config/schema.js';
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
    if (!existsSync(join(this.path, MAIN)))
      throw new InvalidPropsError(scope, `cache node bundle directory ${this.path} has no ${MAIN}`);
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
      throw new InvalidPropsError(
        scope,
        `cache node entry ${relative(REPO_ROOT, entry) || entry} does not exist: the fleet bundles the cachenode daemon from it (CacheNodeBundle.fromEntry). Point it at the daemon's entry file, or use CacheNodeBundle.fromDirectory() with a prebuilt bundle.`,
      );
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
            writeFileSync(
              join(outputDir, 'package.json'),
              JSON.stringify({ name: 'strata-cachenode', private: true, type: 'module', main: MAIN }, null, 2) + '\n',
            );
            if (nativeModules.length > 0)
              cpSync(nativeDir, join(outputDir, 'node_modules'), { recursive: true, dereference: true });
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
    if (!existsSync(pkgFile))
      throw new InvalidPropsError(scope, `native module '${m}' of the cache node is not in ${dir}. ${fix}`);
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { optionalDependencies?: Record<string, string> };
    const arm64 = Object.keys(pkg.optionalDependencies ?? {}).filter((d) => /linux-arm64(?!-musl)/.test(d));
    for (const d of arm64) {
      if (!existsSync(join(dir, d, 'package.json')))
        throw new InvalidPropsError(
          scope,
          `${dir} lacks ${d}, the linux-arm64 build of '${m}' (it was installed for another platform). ${fix}`,
        );
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

export type FleetCapacityType = 'on-demand' | 'spot' | 'mixed';

/** How a fleet's nodes are bought (CacheNodeFleet.capacity). */
export interface FleetCapacity {
  readonly type: FleetCapacityType;
  /** The types a launch may choose among, in priority order for on-demand launches. */
  readonly instanceTypes: readonly string[];
  /** How many running nodes stay on demand: Infinity for 'on-demand', 0 for 'spot'. */
  readonly onDemandBase: number;
}

export interface CacheNodeFleetProps {
  /** Prefixes the launch template name (`<name>-cachenode`) and tags. */
  readonly name: string;
  readonly vpc: ec2.IVpc;
  /** Where the nodes are launched (recorded for the fleet provider; the launch template is subnet-free). */
  readonly vpcSubnets: ec2.SubnetSelection;
  /** A Graviton (arm64) type: the nodes run Amazon Linux 2023 for arm64. The launch template's type. */
  readonly instanceType: string;
  /**
   * How the nodes are bought: 'on-demand' (RunInstances), 'spot' or 'mixed' (an instant EC2 Fleet over
   * {@link instanceTypes}; see workflows/fleet-launch.ts). @default 'on-demand'
   */
  readonly capacity?: FleetCapacityType;
  /** The types a spot or mixed launch may choose among (at least 2, Graviton). @default [instanceType] */
  readonly instanceTypes?: readonly string[];
  /** Mixed fleets: the nodes kept on demand. @default 1 */
  readonly onDemandBase?: number;
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
  /**
   * The ring store (bucket and prefix). Nodes read its ring document every `pollMs` and install newer versions
   * themselves (a node that missed a push catches up without waiting for a caller), read the fleet's shared secret
   * from it at start (`fleet/secret`, created by the workflow steps), and write their statistics report to it
   * (`nodes/<id>/stats.json`). Those three objects and nothing else of it.
   */
  readonly ringStore: { readonly bucket: s3.IBucket; readonly prefix: string; readonly pollMs?: number };
}

/** Where the data volume is mounted on a node. */
export const DATA_MOUNT = '/var/lib/strata';
/** The data volume's device name in the launch template (AL2023 links the NVMe device to it). */
const DATA_DEVICE = '/dev/sdf';

/**
 * What the warm tier's EC2 fleet provider launches: a launch template (Amazon Linux 2023 arm64, IMDSv2 only,
 * encrypted gp3 root and data volumes) whose user data installs Node from the AL2023 repository (served from S3,
 * so reachable through the S3 gateway endpoint without NAT), formats and mounts the data volume, fetches the
 * daemon bundle from its S3 asset and runs it under systemd. The daemon reads the fleet's shared secret from the
 * ring store at start (waiting until the workflow steps have created it) and writes its statistics report there:
 * everything a node calls is S3, so it needs no interface endpoint. The instance role can read exactly the bundle,
 * the ring document and the secret, and write exactly its own report; the security group admits only the
 * coordinators' security group, on the daemon port.
 */
export class CacheNodeFleet extends Construct {
  /**
   * AWS services the nodes call that need an interface endpoint in an isolated VPC: none. They call S3 only (the
   * gateway endpoint is free), the fleet secret included: it lives in the ring store, not in Secrets Manager.
   */
  static readonly INTERFACE_ENDPOINTS: readonly ec2.InterfaceVpcEndpointAwsService[] = [];

  readonly launchTemplate: ec2.LaunchTemplate;
  readonly securityGroup: ec2.SecurityGroup;
  readonly role: iam.Role;
  /**
   * ARN of the ring-store object holding the shared secret between coordinators and nodes (the cachenode refuses
   * requests without it). Coordinators read it with {@link grantReadSecret}.
   */
  readonly secretObjectArn: string;
  /**
   * What precedes a node's id in its statistics report id: `<role id>:`, so a node's report is
   * `nodes/<role id>:<instance id>/stats.json` (node-reports.ts nodeStatsKey), the key its role may write.
   * Readers of the reports look a node up with `nodeStatsKey(statsReportIdPrefix + nodeId)`.
   */
  readonly statsReportIdPrefix: string;
  readonly bundle: s3assets.Asset;
  readonly port: number;
  readonly vpcSubnets: ec2.SubnetSelection;
  /** How the nodes are bought, with the types a launch may choose among and (mixed) the on-demand base. */
  readonly capacity: FleetCapacity;

  constructor(scope: Construct, id: string, props: CacheNodeFleetProps) {
    super(scope, id);
    check(
      this,
      /^[a-z][a-z0-9-]{0,39}$/.test(props.name),
      `name '${props.name}' must be 1-40 characters of a-z, 0-9 and "-", starting with a letter`,
    );
    check(
      this,
      GRAVITON_INSTANCE_TYPE.test(props.instanceType),
      `instanceType '${props.instanceType}' is not a Graviton (arm64) type such as t4g.small, m7g.large or r7g.xlarge: the nodes run the arm64 AMI`,
    );
    const capacityIssues = fleetCapacityIssues(props);
    check(this, capacityIssues.length === 0, capacityIssues.map((i) => i.message).join('; '));
    const capacityType = props.capacity ?? 'on-demand';
    this.capacity = {
      type: capacityType,
      instanceTypes: [...(props.instanceTypes ?? [props.instanceType])],
      onDemandBase: capacityType === 'mixed' ? (props.onDemandBase ?? 1) : capacityType === 'spot' ? 0 : Infinity,
    };
    const v = props.dataVolume;
    const iops = v.iops ?? 3000;
    const throughput = v.throughputMiBps ?? 125;
    check(this, intIn(v.sizeGiB, 1, 16384), `dataVolume.sizeGiB must be a whole number from 1 to 16384 (got ${v.sizeGiB})`);
    check(this, intIn(iops, 3000, 80000), `dataVolume.iops must be 3000-80000 for gp3 (got ${iops})`);
    check(
      this,
      iops <= v.sizeGiB * 500 || iops === 3000,
      `dataVolume.iops ${iops} exceeds gp3's 500 IOPS per GiB for ${v.sizeGiB} GiB`,
    );
    check(this, intIn(throughput, 125, 2000), `dataVolume.throughputMiBps must be 125-2000 for gp3 (got ${throughput})`);
    check(
      this,
      throughput <= iops / 4 || throughput === 125,
      `dataVolume.throughputMiBps ${throughput} exceeds gp3's 0.25 MiB/s per provisioned IOPS (${iops} IOPS allow ${iops / 4})`,
    );
    this.port = props.port ?? 7070;
    check(this, intIn(this.port, 1024, 65535), `port must be 1024-65535 (got ${this.port})`);
    const capacityRatio = props.capacityRatio ?? 0.9;
    check(
      this,
      capacityRatio > 0 && capacityRatio <= 0.95,
      `capacityRatio must be in (0, 0.95]: the file system needs headroom (got ${capacityRatio})`,
    );
    const nodePackage = props.nodePackage ?? 'nodejs24';
    const nodeMajor = /^nodejs(\d+)$/.exec(nodePackage)?.[1];
    check(
      this,
      nodeMajor !== undefined && Number(nodeMajor) >= 22,
      `nodePackage '${nodePackage}' must be an AL2023 namespaced Node.js package, nodejs22 or later (e.g. nodejs24)`,
    );
    this.vpcSubnets = props.vpcSubnets;

    this.bundle = props.bundle.bind(this);

    this.securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: `Strata cache nodes (${props.name}): daemon port from the coordinators only`,
      allowAllOutbound: false,
    });
    // Isolated subnets route only to the VPC endpoints, so 443 reaches S3 (bundle, AL2023 packages, the ring store).
    this.securityGroup.addEgressRule(ec2.Peer.anyIpv4(), ec2.Port.tcp(443), 'HTTPS to S3 (gateway endpoint)');
    // Ingress on the nodes' group and egress on the coordinators' group, both for the daemon port only; both rules
    // live with the nodes' group (the coordinators' group is older and must not depend on the fleet).
    this.securityGroup.connections.allowFrom(
      props.coordinatorSecurityGroup,
      ec2.Port.tcp(this.port),
      'cachenode daemon from the coordinators',
    );

    const ring = props.ringStore;
    this.secretObjectArn = ring.bucket.arnForObjects(`${ring.prefix}/${FLEET_SECRET_KEY}`);

    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      description: `Strata cache node (${props.name})`,
    });
    // Three objects: the daemon bundle, the ring document (polled) and the fleet secret (read at start).
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadBundleRingAndSecret',
        actions: ['s3:GetObject'],
        resources: [
          this.bundle.bucket.arnForObjects(this.bundle.s3ObjectKey),
          ring.bucket.arnForObjects(`${ring.prefix}/${RING_KEY}`),
          this.secretObjectArn,
        ],
      }),
    );
    // Each node writes its own report and no other node's. An instance profile's credentials are a role session
    // named after the instance, so its aws:userid is `<role id>:<instance id>` (IAM User Guide, "Principal key
    // values": "Role assigned to an Amazon EC2 instance"), and a policy variable in the resource part of an ARN is
    // replaced by the caller's value when the request is evaluated:
    //   https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html#principaltable
    //   https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html#policy-vars-resourceelement
    // The report is therefore keyed by that whole value (STRATA_NODE_STATS_ID below): no variable holds the instance
    // id alone, and an ARN cannot be cut, so `nodes/<instance id>/...` could only be granted to every node at once.
    const USERID = 'AWS-USERID';
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteOwnStatsReport',
        actions: ['s3:PutObject'],
        resources: [ring.bucket.arnForObjects(`${ring.prefix}/${nodeStatsKey(USERID).replace(USERID, '${aws:userid}')}`)],
      }),
    );
    this.statsReportIdPrefix = `${this.role.roleId}:`;

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
    const zip = userData.addS3DownloadCommand({
      bucket: this.bundle.bucket,
      bucketKey: this.bundle.s3ObjectKey,
      localFile: '/opt/strata/cachenode.zip',
      region,
    });
    const envFile = [
      `STRATA_NODE_PORT=${this.port}`,
      `STRATA_NODE_DATA_DIR=${DATA_MOUNT}`,
      `STRATA_NODE_CAPACITY_BYTES=${capacityBytes}`,
      `AWS_REGION=${region}`,
      `STRATA_NODE_RING_STORE=s3://${ring.bucket.bucketName}/${ring.prefix}`,
      `STRATA_NODE_RING_POLL_MS=${ring.pollMs ?? 5000}`,
      // The daemon waits at start until the secret exists (the workflow steps create it before the first launch).
      'STRATA_NODE_SECRET_FROM_RING=1',
      // Expanded by the heredoc below ($INSTANCE_ID from the instance metadata). The report id is the instance's
      // aws:userid: the one report key the role lets it write (see the role above).
      'STRATA_NODE_ID=$INSTANCE_ID',
      `STRATA_NODE_STATS_ID=${this.statsReportIdPrefix}$INSTANCE_ID`,
    ];
    userData.addCommands(
      `rm -rf /opt/strata/cachenode && mkdir -p /opt/strata/cachenode && unzip -q ${zip} -d /opt/strata/cachenode`,
      'TOKEN=$(curl -sS -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 60")',
      'INSTANCE_ID=$(curl -sS -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/instance-id)',
      'mkdir -p /etc/strata',
      `cat > /etc/strata/cachenode.env <<EOF\n${envFile.join('\n')}\nEOF`,
      `cat > /etc/systemd/system/strata-cachenode.service <<'EOF'\n${systemdUnit(`/usr/bin/node-${nodeMajor}`)}\nEOF`,
      'systemctl daemon-reload',
      'systemctl enable --now strata-cachenode.service',
    );

    this.launchTemplate = new ec2.LaunchTemplate(this, 'LaunchTemplate', {
      launchTemplateName: `${props.name}-cachenode`,
      versionDescription: 'Strata cache node',
      machineImage: ec2.MachineImage.latestAmazonLinux2023({ cpuType: ec2.AmazonLinuxCpuType.ARM_64 }),
      instanceType: new ec2.InstanceType(props.instanceType),
      // No network interface: EC2 refuses one next to the subnet each launch must name. RunInstances (on-demand) passes
      // one interface with the security group and `AssociatePublicIpAddress: false` (workflows/fleet-launch.ts). An
      // EC2 Fleet request has no network settings but a subnet per override, so a spot or mixed fleet's template
      // names the security group itself (top-level SecurityGroupIds, not an interface), and the fleet's private
      // subnets assign no public IP (MapPublicIpOnLaunch false: test/infra/spot-fleet.test.ts).
      ...(capacityType === 'on-demand' ? {} : { securityGroup: this.securityGroup }),
      role: this.role,
      userData,
      requireImdsv2: true,
      httpPutResponseHopLimit: 1,
      ebsOptimized: true,
      detailedMonitoring: false,
      instanceInitiatedShutdownBehavior: ec2.InstanceInitiatedShutdownBehavior.TERMINATE,
      blockDevices: [
        {
          deviceName: '/dev/xvda',
          volume: ec2.BlockDeviceVolume.ebs(10, {
            volumeType: ec2.EbsDeviceVolumeType.GP3,
            encrypted: true,
            deleteOnTermination: true,
          }),
        },
        {
          deviceName: DATA_DEVICE,
          volume: ec2.BlockDeviceVolume.ebs(v.sizeGiB, {
            volumeType: ec2.EbsDeviceVolumeType.GP3,
            iops,
            throughput,
            encrypted: true,
            deleteOnTermination: true,
          }),
        },
      ],
    });
    Tags.of(this.launchTemplate).add('strata:role', 'cachenode');
    // RunInstances tags the instance and its volumes in its own request. An instant EC2 Fleet request tags only the
    // fleet and its instances ("If the fleet type is instant, specify a resource type of fleet to tag the fleet or
    // instance to tag the instances at launch": https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html),
    // so the volumes take the fleet's tag from the template, which the launch IAM's aws:RequestTag condition needs.
    if (capacityType !== 'on-demand') Tags.of(this.launchTemplate).add(FLEET_TAG, props.name);
    // The user data names the role's id (STRATA_NODE_STATS_ID): that GetAtt already orders the role first, which makes
    // the DependsOn CDK adds for the instance profile's role redundant, and cfn-lint warns (W3005).
    (this.launchTemplate.node.defaultChild as ec2.CfnLaunchTemplate).addMetadata('cfn-lint', {
      config: {
        ignore_checks: ['W3005'],
        ignore_reasons: { W3005: 'the user data reads the role id (GetAtt) besides the DependsOn CDK adds' },
      },
    });
  }

  /** Lets `grantee` (a coordinator) read the fleet secret: its one ring-store object, through the S3 gateway endpoint. */
  grantReadSecret(grantee: iam.IGrantable): iam.Grant {
    return iam.Grant.addToPrincipal({ grantee, actions: ['s3:GetObject'], resourceArns: [this.secretObjectArn] });
  }

  /**
   * Lets `grantee` create the fleet secret when it does not exist, and never replace it: s3:PutObject on that one
   * object only with an If-None-Match header (S3 accepts only `*` there, so such a put can only create). The
   * workflow steps create it before launching nodes; a coordinator that starts first must be able to as well, or
   * a fresh deployment's API would fail until some workflow ran. The condition key and this use of it:
   *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html (example 1)
   */
  grantCreateSecret(grantee: iam.IGrantable): iam.Grant {
    const createOnly = { Null: { 's3:if-none-match': 'false' } };
    return iam.Grant.addToPrincipal({
      grantee,
      actions: ['s3:PutObject'],
      resourceArns: [this.secretObjectArn],
      conditions: createOnly,
    });
  }
}

function systemdUnit(node: string): string {
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
