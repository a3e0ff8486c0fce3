// Hand-built RESP frames: a whole EVALSHA (or EVAL) call of a script laid out in one buffer.
import type { Command } from 'ioredis';
import type { Entry } from '../../model/entry.js';
import { BLOB_PREFIX_BYTES, checkedJsonBytes, storedHeaderJson, writeBlob } from './blob.js';
import { FramedCommand } from './ioredis-internals.js';
import { expiryArg, PUT, type Lua } from './scripts.js';

/** The start of an EVALSHA frame of `s` with 2 keys and 2 arguments, up to and including the sha. */
function evalshaFrameHead(s: Lua): string {
  return `*7\r\n$7\r\nevalsha\r\n$40\r\n${s.sha}\r\n`;
}

/** The same call as an EVALSHA frame, as EVAL (the script's text instead of its sha). */
export function evalFrame(s: Lua, evalshaFrame: Buffer): Buffer {
  const head = evalshaFrameHead(s);
  if (evalshaFrame.toString('latin1', 0, head.length) !== head) throw new Error('RedisTier: not an EVALSHA frame of this script');
  const evalHead = Buffer.from(`*7\r\n$4\r\neval\r\n$${Buffer.byteLength(s.lua)}\r\n${s.lua}\r\n`);
  return Buffer.concat([evalHead, evalshaFrame.subarray(head.length)]);
}

const PUT_FRAME_START = `${evalshaFrameHead(PUT)}$1\r\n2\r\n`;

/**
 * EVALSHA of the put script as one RESP frame: the entry is laid out in place, so the value is copied once (into
 * the frame) and nothing is converted per argument. Exported for tests.
 */
export function putCommand(id: string, dirty: string, entry: Entry, residencyMs?: number): Command {
  const h = entry.header;
  const json = storedHeaderJson(h);
  const jsonBytes = checkedJsonBytes(h, json);
  const blobBytes = BLOB_PREFIX_BYTES + jsonBytes + entry.value.length;
  const expiresAt = expiryArg(h, residencyMs);
  const idBytes = Buffer.byteLength(id);
  const dirtyBytes = Buffer.byteLength(dirty);
  const head = `${PUT_FRAME_START}$${idBytes}\r\n${id}\r\n$${dirtyBytes}\r\n${dirty}\r\n$${blobBytes}\r\n`;
  const ascii = idBytes === id.length && dirtyBytes === dirty.length;
  const headBytes = ascii ? head.length : Buffer.byteLength(head);
  const tail = `\r\n$${expiresAt.length}\r\n${expiresAt}\r\n`;
  const frame = Buffer.allocUnsafe(headBytes + blobBytes + tail.length);
  frame.write(head, 0, ascii ? 'latin1' : 'utf8');
  writeBlob(frame, headBytes, h, json, jsonBytes, entry.value);
  frame.write(tail, headBytes + blobBytes, 'latin1');
  return new FramedCommand('evalsha', frame);
}
