/**
 * The Node.js flags every cache-node process starts with, whoever starts it: the local fleet provider, the EC2
 * provider's unit file and the CDK fleet's unit file.
 *
 * The V8 heap flags give the node a young generation large enough to hold what its requests allocate and drop
 * within a few milliseconds (record objects of a migration's import, response bookkeeping), and an old
 * generation that starts large enough to take a migration's working set. Without them, a node that had just
 * joined ran its first full collections while serving its first ranges: measured on the `scale-out` benchmark
 * (0.25-CPU nodes, `--trace-gc`), the new node ran 5 mark-compacts in the 12 s of a migration and the source 2,
 * each 30–90 ms of wall time, which showed as 140–160 ms request stalls and seconds at −15–30% throughput. With
 * the flags, none ran in those 12 s, scavenges halved on every node, and the worst stall fell to 69 ms.
 *
 * The cost is memory: a node's heap may now reach about 200 MiB (64 MiB of young generation, 128 MiB of old)
 * before its first full collection, small beside the page cache of the store it serves.
 */
export const CACHE_NODE_V8_FLAGS: readonly string[] = [
  // MiB per semi-space: the young generation starts at 16 (V8 starts it at 1 and grows it under load) and grows
  // to 32 at most, whatever the instance's memory (V8's own maximum depends on it).
  '--min-semi-space-size=16',
  '--max-semi-space-size=32',
  // MiB: the old generation's first collection limit.
  '--initial-old-space-size=128',
];
