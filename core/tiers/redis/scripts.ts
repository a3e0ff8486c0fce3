// The Lua scripts of the hot tier (put, delete, mark clean, confirm, dirty check), their arguments and replies.
import { createHash } from 'node:crypto';
import type { ChainableCommander, Cluster, Redis } from 'ioredis';
import type { EntryHeader, WriteOutcome } from '../../model/entry.js';

// Lua runs atomically on the node owning the slot; every script touches only an entry and its shard's dirty
// set, which share a hash tag. The dirty-set member is derived from the entry key (`<prefix>:{<shard>}:` +
// member; the prefix has no '}'), so it is not passed. Versions are compared with tonumber(): they are safe
// integers (< 2^53), exact as Lua doubles. A key of another type (an entry in an older layout) reads as absent
// and is replaced by a write.

const MEMBER_FN = `local function member(k) return string.sub(k, string.find(k, '}:', 1, true) + 2) end\n`;

/**
 * KEYS: entry, dirty set. ARGV: blob, expiresAt ms ('' = none), optionally '1': only if the key holds no entry at
 * all (PutOptions.ifAbsent; an expired one is gone already). Returns the new version when applied, else
 * -1 - the stored version (integers: exact, versions are < 2^53). SET replaces the previous TTL; PXAT in the past
 * deletes the key at once.
 */
const PUT_LUA = `${MEMBER_FN}
local blob = ARGV[1]
local cur = redis.pcall('GETRANGE', KEYS[1], 0, 16)
if type(cur) ~= 'string' then
  redis.call('DEL', KEYS[1])
  cur = ''
end
local ver = tonumber(string.sub(blob, 1, 16))
if cur ~= '' and (ARGV[3] == '1' or tonumber(string.sub(cur, 1, 16)) >= ver) then return -1 - tonumber(string.sub(cur, 1, 16)) end
if ARGV[2] == '' then redis.call('SET', KEYS[1], blob) else redis.call('SET', KEYS[1], blob, 'PXAT', ARGV[2]) end
if string.byte(blob, 17) == 49 and redis.call('EXISTS', KEYS[1]) == 1 then
  -- NX keeps the time the entry first became dirty, so a hot key rewritten over and over still gets flushed.
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[2], 'NX', t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)), member(KEYS[1]))
elseif cur == '' or string.byte(cur, 17) == 49 or string.byte(blob, 17) == 49 then
  -- Clean now (or dirty but already expired): out of the dirty set. A clean entry over a clean one has no member.
  redis.call('ZREM', KEYS[2], member(KEYS[1]))
end
return ver
`;

/** KEYS: entry, dirty set. ARGV: expected version (16 digits; '' = any). */
const DELETE_LUA = `${MEMBER_FN}
if ARGV[1] ~= '' and redis.pcall('GETRANGE', KEYS[1], 0, 15) ~= ARGV[1] then return 0 end
redis.call('ZREM', KEYS[2], member(KEYS[1]))
return redis.call('DEL', KEYS[1])
`;

/**
 * KEYS: entry, dirty set. ARGV: version (16 digits), residency deadline ms ('' = none). Clears the dirty byte in
 * place; the deadline then caps the TTL (PEXPIREAT … LT: a key without a TTL counts as infinite), so a flushed
 * copy becomes evictable under volatile-lru.
 */
const MARK_CLEAN_LUA = `${MEMBER_FN}
local cur = redis.pcall('GETRANGE', KEYS[1], 0, 16)
if cur == '' then
  redis.call('ZREM', KEYS[2], member(KEYS[1]))
  return 0
end
if type(cur) ~= 'string' or string.sub(cur, 1, 16) ~= ARGV[1] then return 0 end
if string.byte(cur, 17) == 49 then redis.call('SETRANGE', KEYS[1], 16, '0') end
if ARGV[2] ~= nil and ARGV[2] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[2], 'LT') end
redis.call('ZREM', KEYS[2], member(KEYS[1]))
return 1
`;

/** KEYS: entry, dirty set. ARGV: version (16 digits). A pending copy of exactly that version becomes servable. */
const CONFIRM_LUA = `
if redis.pcall('GETRANGE', KEYS[1], 0, 16) ~= ARGV[1] .. '2' then return 0 end
redis.call('SETRANGE', KEYS[1], 16, '0')
return 1
`;

/**
 * KEYS: entry, dirty set. Drops a member whose entry is clean (0) or gone (2: expired or evicted before it was
 * flushed, a write-back loss); 1 if the entry is dirty.
 */
const DIRTY_CHECK_LUA = `${MEMBER_FN}
local b = redis.pcall('GETRANGE', KEYS[1], 16, 16)
if b == '1' then return 1 end
redis.call('ZREM', KEYS[2], member(KEYS[1]))
if b == '' then return 2 end
return 0
`;

export interface Lua {
  readonly lua: string;
  readonly sha: string;
}

function lua(source: string): Lua {
  return { lua: source, sha: createHash('sha1').update(source).digest('hex') };
}

export const PUT = lua(PUT_LUA);
export const DELETE = lua(DELETE_LUA);
export const MARK_CLEAN = lua(MARK_CLEAN_LUA);
export const CONFIRM = lua(CONFIRM_LUA);

/** The Lua commands defined on the client for pipelines (prefixed so they cannot clash with an injected client's own). */
interface StrataCommands<R> {
  strataTierPut(entry: string, dirty: string, blob: Buffer, expiresAt: string): R;
  strataTierDelete(entry: string, dirty: string, version: string): R;
  strataTierDirtyCheck(entry: string, dirty: string): R;
}
export type Client = (Redis | Cluster) & StrataCommands<Promise<unknown>>;
export type Pipeline = ChainableCommander & StrataCommands<ChainableCommander>;

export function defineCommands(client: Redis | Cluster): Client {
  client.defineCommand('strataTierPut', { numberOfKeys: 2, lua: PUT.lua });
  client.defineCommand('strataTierDelete', { numberOfKeys: 2, lua: DELETE.lua });
  client.defineCommand('strataTierDirtyCheck', { numberOfKeys: 2, lua: DIRTY_CHECK_LUA });
  return client as Client;
}

/** A Lua runtime/compile error is a bug in this module, not an outage: let it surface as is. */
export function isScriptBug(e: unknown): boolean {
  return e instanceof Error && /user_script|Error (running|compiling) script/.test(e.message);
}

export function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('NOSCRIPT');
}

/**
 * PXAT takes whole milliseconds (> 0); round up so Redis never expires an entry before isExpired() would. A
 * residency bound caps it (never for a dirty entry: its only copy is here until it is flushed).
 */
export function expiryArg(h: EntryHeader, residencyMs?: number): string {
  let at = h.expiresAt;
  if (residencyMs !== undefined && !h.flags.dirty) at = Math.min(at ?? Infinity, Date.now() + residencyMs);
  return at === null ? '' : String(Math.max(1, Math.ceil(at)));
}

/** The PUT script's reply: the new version when applied, else -1 - the stored one. */
export function writeOutcome(reply: unknown): WriteOutcome {
  const n = reply as number;
  return n >= 0 ? { applied: true, current: n } : { applied: false, current: -1 - n };
}

/** The reply of the delete, mark-clean and confirm scripts (and DEL): 1 when done. */
export function isOne(reply: unknown): boolean {
  return reply === 1;
}
