// Noticing a lost data volume: the data directory the node opened deleted, replaced, or another volume mounted there.
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** The marker file: a random token written once per data directory, read back by every check. */
export const VOLUME_MARKER = 'volume.id';

/** Failed checks in a row (other than "not there") after which the volume counts as lost: a dead disk. */
const MAX_CHECK_ERRORS = 3;

/**
 * Watches that the node's data directory still holds the store it opened. LMDB and the write journal keep their
 * files open, so when the directory is deleted under a running node (a lost or detached volume, an operator's
 * `rm -rf`) the node goes on serving and acknowledging writes into unlinked files, and loses all of it at its next
 * restart, where it would come back empty but still the owner of its ranges. The watch makes that loss visible
 * within one check: the directory's device and inode must be the ones opened, and its marker file must hold the
 * token this node read or wrote at start (a fresh volume mounted on the same path has neither).
 *
 * Checks use the asynchronous fs calls (the thread pool): a stalled disk must not stall the event loop.
 */
export class VolumeWatch {
  private timer: NodeJS.Timeout | undefined;
  private checking = false;
  private errors = 0;
  private lost: string | undefined;

  private constructor(
    readonly dir: string,
    private readonly dev: number,
    private readonly ino: number,
    private readonly token: string,
  ) {}

  /** Reads the directory's marker, writing one when it has none yet (a new directory, or one older than markers). */
  static open(dir: string): VolumeWatch {
    const marker = join(dir, VOLUME_MARKER);
    let token: string;
    try {
      token = readFileSync(marker, 'utf8').trim();
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      token = randomBytes(16).toString('hex');
      const fd = openSync(marker, 'wx');
      try {
        writeSync(fd, token + '\n');
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    const s = statSync(dir);
    return new VolumeWatch(dir, s.dev, s.ino, token);
  }

  /** Why the volume is lost, or undefined while it is still the one opened. Never throws. */
  async check(): Promise<string | undefined> {
    if (this.lost) return this.lost;
    try {
      const s = await stat(this.dir);
      if (s.dev !== this.dev || s.ino !== this.ino) return (this.lost = `the data directory ${this.dir} was replaced`);
      const token = (await readFile(join(this.dir, VOLUME_MARKER), 'utf8')).trim();
      if (token !== this.token)
        return (this.lost = `the data directory ${this.dir} holds another volume (its ${VOLUME_MARKER} changed)`);
      this.errors = 0;
      return undefined;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        return (this.lost = `the data directory ${this.dir} or its ${VOLUME_MARKER} is gone (volume lost or deleted)`);
      }
      // A read error once may be a hiccup; several in a row are a disk the node cannot use.
      if (++this.errors >= MAX_CHECK_ERRORS) {
        return (this.lost = `the data directory ${this.dir} failed ${this.errors} checks in a row: ${(e as Error).message}`);
      }
      return undefined;
    }
  }

  /** Checks every `intervalMs` and calls `onLost` once, with the reason, when the volume is lost. */
  start(intervalMs: number, onLost: (reason: string) => void): void {
    this.timer = setInterval(() => {
      if (this.checking) return;
      this.checking = true;
      void this.check().then((reason) => {
        this.checking = false;
        if (!reason) return;
        this.stop();
        onLost(reason);
      });
    }, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
