/**
 * Fleet providers: where cache nodes come from. `local` spawns cachenode processes on this machine (tests, the
 * local run, benchmarks); `ec2` launches instances from a launch template with an encrypted gp3 data volume.
 * The migration steps only need {@link FleetProvider.launch} and {@link FleetProvider.terminate}.
 */
export interface LaunchedNode {
  nodeId: string;
  /** Base URL of the node's API. */
  url: string;
  /** Provider reference: an EC2 instance id, or `local:<pid>`. */
  instance: string;
  /** From the launch request to the node answering its health check (paper 000's allocation time). */
  allocationMs: number;
}

export interface FleetProvider {
  readonly kind: 'local' | 'ec2';
  /** Starts one node and resolves once it is healthy. */
  launch(nodeId: string): Promise<LaunchedNode>;
  /** Stops the node and releases what it used (its data volume included). */
  terminate(nodeId: string): Promise<void>;
  /** Nodes this provider runs. */
  list(): Promise<LaunchedNode[]>;
  /** Releases the provider's own resources (not the nodes, unless the provider says otherwise). */
  close(): Promise<void>;
}

/** Polls `probe` until it returns true, every `intervalMs`, for at most `timeoutMs`. */
export async function waitUntil(
  what: string,
  probe: () => Promise<boolean>,
  opts: { timeoutMs: number; intervalMs: number; signal?: AbortSignal },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let last: unknown;
  for (;;) {
    opts.signal?.throwIfAborted();
    try {
      if (await probe()) return;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= deadline)
      throw new Error(
        `${what}: not ready within ${opts.timeoutMs} ms${last instanceof Error ? ` (last error: ${last.message})` : ''}`,
      );
    await new Promise((r) => setTimeout(r, opts.intervalMs));
  }
}
