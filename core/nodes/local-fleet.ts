import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { FleetProvider, LaunchedNode } from './fleet.js';
import { CACHE_NODE_V8_FLAGS } from './node-process.js';

/** The repository root, from this file's place in it (core/nodes). */
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface LocalFleetOptions {
  /** Each node's data dir is `<rootDir>/<nodeId>`. */
  rootDir: string;
  secret: string;
  /** @default '127.0.0.1' */
  host?: string;
  /** Per node. @default 1 GiB */
  capacityBytes?: number;
  /** Extra environment of every node (STRATA_NODE_* settings). */
  env?: Record<string, string>;
  /** The daemon's entry point. @default cachenode/src/main.ts, run through tsx */
  entry?: string;
  /** @default 30000 */
  startTimeoutMs?: number;
}

interface LocalNode {
  nodeId: string;
  dir: string;
  port: number;
  child: ChildProcess | undefined;
  exited: Promise<number | null> | undefined;
  launched: LaunchedNode;
  stderr: string[];
  /** The launch environment it was launched with (see {@link LocalFleet.setLaunchEnv}); a restart keeps it. */
  launchEnv: Record<string, string>;
}

/**
 * Cache nodes as local processes (`node --import tsx cachenode/src/main.ts`), each with its own data dir and
 * port. Beyond the provider interface it can kill (any signal, `SIGKILL` for crash tests), stop gracefully and
 * restart a node on the same dir and port.
 */
export class LocalFleet implements FleetProvider {
  readonly kind = 'local' as const;
  private readonly nodes = new Map<string, LocalNode>();
  private readonly host: string;
  private readonly entry: string;
  private launchEnv: Record<string, string> = {};

  constructor(private readonly opts: LocalFleetOptions) {
    this.host = opts.host ?? '127.0.0.1';
    this.entry = opts.entry ?? join(REPO_ROOT, 'cachenode', 'src', 'main.ts');
    mkdirSync(opts.rootDir, { recursive: true });
  }

  /**
   * Extra environment of the nodes launched from now on (over `env`), e.g. `{ STRATA_NODE_BUILD: 'v2' }`: locally,
   * what a new launch template version is on EC2, the mark of "a new version" that a rolling upgrade rolls out.
   * Nodes already running keep theirs.
   */
  setLaunchEnv(env: Record<string, string>): void {
    this.launchEnv = { ...env };
  }

  /** The launch environment `nodeId` was launched with (`{}` before any {@link setLaunchEnv}). */
  launchEnvOf(nodeId: string): Record<string, string> | undefined {
    const n = this.nodes.get(nodeId);
    return n && { ...n.launchEnv };
  }

  async launch(nodeId: string): Promise<LaunchedNode> {
    if (this.nodes.has(nodeId)) throw new Error(`local node '${nodeId}' already exists`);
    const dir = join(this.opts.rootDir, nodeId);
    const started = performance.now();
    const node: LocalNode = {
      nodeId,
      dir,
      port: 0,
      child: undefined,
      exited: undefined,
      launched: undefined as unknown as LaunchedNode,
      stderr: [],
      launchEnv: { ...this.launchEnv },
    };
    this.nodes.set(nodeId, node);
    try {
      await this.spawn(node);
    } catch (e) {
      this.nodes.delete(nodeId);
      throw e;
    }
    node.launched = {
      nodeId,
      url: this.url(node),
      instance: `local:${node.child!.pid}`,
      allocationMs: Math.round(performance.now() - started),
    };
    return node.launched;
  }

  private url(node: LocalNode): string {
    return `http://${this.host}:${node.port}`;
  }

  private async spawn(node: LocalNode): Promise<void> {
    const inherited: NodeJS.ProcessEnv = { ...process.env };
    delete inherited.NODE_OPTIONS; // Jest's --experimental-vm-modules is not for the daemon
    const env: NodeJS.ProcessEnv = {
      ...inherited,
      ...this.opts.env,
      ...node.launchEnv,
      STRATA_NODE_SECRET: this.opts.secret,
    };
    const args = [
      ...CACHE_NODE_V8_FLAGS,
      '--import',
      'tsx',
      this.entry,
      '--data-dir',
      node.dir,
      '--port',
      String(node.port),
      '--host',
      this.host,
      '--node-id',
      node.nodeId,
      '--capacity-bytes',
      String(this.opts.capacityBytes ?? 1024 ** 3),
    ];
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    node.child = child;
    node.stderr = [];
    node.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (s: string) => {
      node.stderr.push(s);
      if (node.stderr.length > 50) node.stderr.shift();
    });
    const lines = createInterface({ input: child.stdout! });
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `cache node '${node.nodeId}' did not start within ${this.opts.startTimeoutMs ?? 30_000} ms: ${node.stderr.join('').slice(-2000)}`,
            ),
          ),
        this.opts.startTimeoutMs ?? 30_000,
      );
      lines.on('line', (line) => {
        try {
          const ev = JSON.parse(line) as { event?: string; port?: number };
          if (ev.event === 'listening' && ev.port) {
            node.port = ev.port;
            clearTimeout(timer);
            resolve();
          }
        } catch {
          /* not an event line */
        }
      });
      void node.exited!.then((code) => {
        clearTimeout(timer);
        reject(new Error(`cache node '${node.nodeId}' exited (${code}) before listening: ${node.stderr.join('').slice(-2000)}`));
      });
    });
    await ready;
  }

  /** Sends `signal` (default SIGKILL) and waits for the process to exit. */
  async kill(nodeId: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
    const node = this.require(nodeId);
    if (!node.child || node.child.exitCode !== null || node.child.signalCode !== null) return node.child?.exitCode ?? null;
    node.child.kill(signal);
    return node.exited!;
  }

  /** Graceful stop (SIGTERM: the node drains and flushes). Resolves to the exit code. */
  async stop(nodeId: string): Promise<number | null> {
    return this.kill(nodeId, 'SIGTERM');
  }

  /** Starts a stopped or killed node again on the same data dir and port. */
  async restart(nodeId: string): Promise<LaunchedNode> {
    const node = this.require(nodeId);
    if (node.child && node.child.exitCode === null && node.child.signalCode === null)
      throw new Error(`local node '${nodeId}' is still running`);
    const started = performance.now();
    await this.spawn(node);
    node.launched = {
      ...node.launched,
      instance: `local:${node.child!.pid}`,
      allocationMs: Math.round(performance.now() - started),
    };
    return node.launched;
  }

  pid(nodeId: string): number | undefined {
    return this.nodes.get(nodeId)?.child?.pid;
  }

  running(nodeId: string): boolean {
    const c = this.nodes.get(nodeId)?.child;
    return !!c && c.exitCode === null && c.signalCode === null;
  }

  /** Last lines the node wrote to stderr (diagnostics). */
  stderr(nodeId: string): string {
    return this.nodes.get(nodeId)?.stderr.join('') ?? '';
  }

  async terminate(nodeId: string): Promise<void> {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    if (this.running(nodeId)) {
      const t = setTimeout(() => node.child?.kill('SIGKILL'), 15_000);
      await this.kill(nodeId, 'SIGTERM');
      clearTimeout(t);
    }
    rmSync(node.dir, { recursive: true, force: true });
    this.nodes.delete(nodeId);
  }

  async list(): Promise<LaunchedNode[]> {
    return [...this.nodes.values()].map((n) => n.launched);
  }

  /** Terminates every node (their data dirs included). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.nodes.keys()].map((id) => this.terminate(id)));
  }

  private require(nodeId: string): LocalNode {
    const n = this.nodes.get(nodeId);
    if (!n) throw new Error(`no local node '${nodeId}'`);
    return n;
  }
}
