/**
 * The hot tier's stall watchdog against a real redis-server: it must not mistake its own process standing still
 * (a long GC pause, a starved CPU) for Redis standing still.
 */
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { StallWatchdog } from '../../core/tiers/redis/stall-watchdog.js';
import { testRedisUrl, uniqueName } from '../helpers/env.js';

/**
 * Pushes onto `key` from another thread (its event loop runs while this one is blocked) and raises `flag[0]`
 * once Redis has answered the push.
 */
const PUSHER = `
const { workerData } = require('node:worker_threads');
const net = require('node:net');
const { host, port, key, flag } = workerData;
const s = net.connect(Number(port), host, () => {
  s.write('*3\\r\\n$5\\r\\nLPUSH\\r\\n$' + Buffer.byteLength(key) + '\\r\\n' + key + '\\r\\n$1\\r\\nx\\r\\n');
});
s.once('data', () => { Atomics.store(flag, 0, 1); s.destroy(); });
`;

/** Blocks this thread's event loop until `flag[0]` is raised, then for `moreMs` longer. */
function stallUntil(flag: Int32Array, moreMs: number): void {
  const giveUp = Date.now() + 10_000;
  while (Atomics.load(flag, 0) === 0) {
    if (Date.now() > giveUp) throw new Error('the pushing thread did not get an answer from Redis within 10 s');
  }
  const end = Date.now() + moreMs;
  while (Date.now() < end) {
    // spin
  }
}

describe('StallWatchdog', () => {
  it('does not reset a connection whose answer arrived while the event loop stood still past stallMs', async () => {
    const url = new URL(testRedisUrl());
    const client = new Redis(testRedisUrl(), { maxRetriesPerRequest: 0 });
    client.on('error', () => undefined); // a reset is reported by the rejected command
    const watchdog = new StallWatchdog(client, 200);
    const key = uniqueName('stall-watchdog');
    const flag = new Int32Array(new SharedArrayBuffer(4));
    let worker: Worker | undefined;
    try {
      await client.ping();
      const popped = client.blpop(key, 5);
      // Let the watchdog see the command in flight (it checks every 50 ms), so that its clock is running.
      await new Promise((r) => setTimeout(r, 120));
      worker = new Worker(PUSHER, { eval: true, workerData: { host: url.hostname, port: url.port || '6379', key, flag } });
      // Block in the check phase, as a GC pause can: the next turn of the loop then runs the watchdog's timer
      // (due during the block) before its poll phase reads the answer Redis sent to BLPOP meanwhile.
      await new Promise((r) => setImmediate(r));
      stallUntil(flag, 500);
      await expect(popped).resolves.toEqual([key, 'x']);
    } finally {
      await worker?.terminate();
      watchdog.stop();
      client.disconnect();
    }
  });
});
