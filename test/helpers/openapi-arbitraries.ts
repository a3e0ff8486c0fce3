/**
 * Requests generated from the OpenAPI document, and a checker for what comes back: fast-check arbitraries of
 * values that are valid (or, one input at a time, invalid) by the document's JSON Schemas, and a validator of the
 * JSON Schema subset the document uses. Written for docs/openapi.json, not for OpenAPI in general: an unknown
 * keyword fails loudly rather than being ignored, so the document cannot grow a constraint this does not check.
 */
import fc from 'fast-check';

export interface Schema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  propertyNames?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  not?: Schema;
  format?: string;
  /** Strata's extension: a bound on the UTF-8 bytes of a string (JSON Schema's maxLength counts code points). */
  'x-strata-max-utf8-bytes'?: number;
}

const KNOWN = new Set([
  ...[
    '$ref',
    'type',
    'enum',
    'const',
    'pattern',
    'minLength',
    'maxLength',
    'minimum',
    'exclusiveMinimum',
    'maximum',
    'minItems',
    'maxItems',
    'items',
  ],
  ...[
    'properties',
    'required',
    'additionalProperties',
    'propertyNames',
    'anyOf',
    'oneOf',
    'allOf',
    'not',
    'format',
    'x-strata-max-utf8-bytes',
  ],
  // Annotations: they constrain nothing.
  ...['description', 'contentEncoding', 'default'],
]);

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
  style?: string;
}

export interface MediaType {
  schema?: Schema;
}

export interface ResponseDoc {
  description?: string;
  headers?: Record<string, { schema?: Schema }>;
  content?: Record<string, MediaType>;
}

export interface Operation {
  operationId: string;
  method: string;
  path: string;
  parameters: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, MediaType> };
  responses: Record<string, ResponseDoc>;
}

export interface OpenApiDoc {
  paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>>;
  components: { schemas: Record<string, Schema> };
}

/** One HTTP request: the path already percent-encoded, the body as bytes. */
export interface GeneratedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  body?: Buffer;
  /** What was made invalid, for failure messages (absent: the request is valid by the document). */
  broken?: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const codePoints = (s: string): number => [...s].length;
const equal = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
/** A header value HTTP carries unchanged: visible ASCII, inner spaces, nothing to strip at either end. */
const HEADER_SAFE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

function isType(t: string, v: unknown): boolean {
  switch (t) {
    case 'string':
      return typeof v === 'string';
    case 'integer':
      return Number.isInteger(v);
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'boolean':
      return typeof v === 'boolean';
    case 'null':
      return v === null;
    case 'array':
      return Array.isArray(v);
    case 'object':
      return isObject(v);
    default:
      throw new Error(`openapi-arbitraries: unknown type ${t}`);
  }
}

export class SchemaKit {
  private readonly patterns = new Map<string, RegExp>();
  private readonly invalidCache = new Map<Schema, fc.Arbitrary<unknown> | undefined>();
  private readonly invalidWireCache = new Map<Schema, fc.Arbitrary<unknown> | undefined>();

  constructor(private readonly doc: OpenApiDoc) {}

  /** The document's operations, in document order. */
  operations(): Operation[] {
    return Object.entries(this.doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        ...op,
        method: method.toUpperCase(),
        path,
        parameters: op.parameters ?? [],
      })),
    );
  }

  resolve(s: Schema): Schema {
    if (!s.$ref) return s;
    const name = /^#\/components\/schemas\/(.+)$/.exec(s.$ref)?.[1];
    const target = name ? this.doc.components.schemas[name] : undefined;
    if (!target) throw new Error(`openapi-arbitraries: unresolved ${s.$ref}`);
    return this.resolve(target);
  }

  private regex(pattern: string): RegExp {
    let re = this.patterns.get(pattern);
    // JSON Schema patterns are ECMA-262 regular expressions, unanchored unless they anchor themselves.
    if (!re) this.patterns.set(pattern, (re = new RegExp(pattern, 'u')));
    return re;
  }

  // ---------------------------------------------------------------------------------------------- validation

  /** The first way `v` breaks `schema` (a path and a reason), or undefined when it conforms. */
  check(schema: Schema, v: unknown, at = '$'): string | undefined {
    const s = this.resolve(schema);
    for (const k of Object.keys(s))
      if (!KNOWN.has(k)) throw new Error(`openapi-arbitraries: keyword ${k} is not checked (at ${at})`);
    if ('const' in s && !equal(v, s.const)) return `${at}: is not ${JSON.stringify(s.const)}`;
    if (s.enum && !s.enum.some((e) => equal(e, v))) return `${at}: is not one of ${JSON.stringify(s.enum)}`;
    if (s.type !== undefined) {
      const types = Array.isArray(s.type) ? s.type : [s.type];
      if (!types.some((t) => isType(t, v))) return `${at}: is not of type ${types.join('|')}`;
    }
    if (typeof v === 'string') {
      if (s.pattern !== undefined && !this.regex(s.pattern).test(v)) return `${at}: does not match ${s.pattern}`;
      if (s.minLength !== undefined && codePoints(v) < s.minLength) return `${at}: shorter than ${s.minLength}`;
      if (s.maxLength !== undefined && codePoints(v) > s.maxLength) return `${at}: longer than ${s.maxLength}`;
      const bytes = s['x-strata-max-utf8-bytes'];
      if (bytes !== undefined && Buffer.byteLength(v, 'utf8') > bytes) return `${at}: more than ${bytes} bytes of UTF-8`;
      if (s.format === 'date-time' && Number.isNaN(Date.parse(v))) return `${at}: not a date-time`;
    }
    if (typeof v === 'number') {
      if (s.minimum !== undefined && v < s.minimum) return `${at}: below ${s.minimum}`;
      if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) return `${at}: not above ${s.exclusiveMinimum}`;
      if (s.maximum !== undefined && v > s.maximum) return `${at}: above ${s.maximum}`;
    }
    if (Array.isArray(v)) {
      if (s.minItems !== undefined && v.length < s.minItems) return `${at}: fewer than ${s.minItems} items`;
      if (s.maxItems !== undefined && v.length > s.maxItems) return `${at}: more than ${s.maxItems} items`;
      if (s.items)
        for (let i = 0; i < v.length; i++) {
          const e = this.check(s.items, v[i], `${at}[${i}]`);
          if (e) return e;
        }
    }
    if (isObject(v)) {
      for (const r of s.required ?? []) if (!(r in v)) return `${at}: lacks required ${r}`;
      if (s.propertyNames)
        for (const k of Object.keys(v)) {
          const e = this.check(s.propertyNames, k, `${at} (property name ${JSON.stringify(k)})`);
          if (e) return e;
        }
      for (const [k, val] of Object.entries(v)) {
        const p = s.properties?.[k];
        if (p) {
          const e = this.check(p, val, `${at}.${k}`);
          if (e) return e;
        } else if (s.additionalProperties === false) return `${at}: has unexpected ${k}`;
        else if (isObject(s.additionalProperties)) {
          const e = this.check(s.additionalProperties, val, `${at}.${k}`);
          if (e) return e;
        }
      }
    }
    for (const sub of s.allOf ?? []) {
      const e = this.check(sub, v, at);
      if (e) return e;
    }
    if (s.anyOf && !s.anyOf.some((sub) => this.check(sub, v, at) === undefined)) return `${at}: matches none of anyOf`;
    const oneOf = s.oneOf?.filter((sub) => this.check(sub, v, at) === undefined).length;
    if (oneOf !== undefined && oneOf !== 1) return `${at}: matches ${oneOf} of oneOf, not exactly one`;
    if (s.not && this.check(s.not, v, at) === undefined) return `${at}: matches what it must not (${JSON.stringify(s.not)})`;
    return undefined;
  }

  /** A parameter's value as it travels (a string), read back the way the server reads it, then checked. */
  checkWire(p: Parameter, raw: string): string | undefined {
    const s = this.resolve(p.schema);
    const types = Array.isArray(s.type) ? s.type : [s.type];
    let v: unknown = raw;
    if (types.includes('integer') && /^-?\d+$/.test(raw.trim())) v = Number(raw.trim());
    // Lists in headers are comma-separated (style simple); the server trims the spaces around each item.
    else if (types.includes('array')) v = raw.trim() === '' ? [] : raw.split(',').map((t) => t.trim());
    return this.check(s, v, p.name);
  }

  // ---------------------------------------------------------------------------------------------- valid values

  /** Values valid by `schema` (JSON context: any JSON type). */
  valid(schema: Schema): fc.Arbitrary<unknown> {
    const s = this.resolve(schema);
    let arb: fc.Arbitrary<unknown>;
    if ('const' in s) arb = fc.constant(s.const);
    else if (s.enum) arb = fc.constantFrom(...s.enum);
    else if (s.anyOf || s.oneOf) arb = fc.oneof(...(s.anyOf ?? s.oneOf)!.map((b) => this.valid(b)));
    else if (s.allOf) arb = this.valid(s.allOf[0]!);
    else if (Array.isArray(s.type)) arb = fc.oneof(...s.type.map((t) => this.valid({ ...s, type: t })));
    else {
      switch (s.type) {
        case 'string':
          arb = this.validString(s);
          break;
        case 'integer': {
          const above = s.exclusiveMinimum === undefined ? -Infinity : Math.floor(s.exclusiveMinimum) + 1;
          const min = Math.max(s.minimum ?? -1_000_000, above);
          const max = s.maximum ?? 1_000_000_000;
          arb = fc.oneof({ arbitrary: fc.constantFrom(min, max), weight: 1 }, { arbitrary: fc.integer({ min, max }), weight: 4 });
          break;
        }
        case 'number':
          arb = fc.double({
            min: s.minimum ?? s.exclusiveMinimum,
            minExcluded: s.minimum === undefined && s.exclusiveMinimum !== undefined,
            max: s.maximum,
            noNaN: true,
            noDefaultInfinity: true,
          });
          break;
        case 'boolean':
          arb = fc.boolean();
          break;
        case 'null':
          arb = fc.constant(null);
          break;
        case 'array':
          arb = fc.array(this.valid(s.items ?? {}), { minLength: s.minItems ?? 0, maxLength: s.maxItems ?? 8 });
          break;
        case 'object':
          arb = this.validObject(s);
          break;
        default:
          arb = fc.jsonValue({ maxDepth: 2 });
      }
    }
    return arb.filter((v) => this.check(s, v) === undefined);
  }

  private validString(s: Schema): fc.Arbitrary<string> {
    const min = s.minLength ?? 0;
    const short = fc.string({ unit: 'grapheme', minLength: min, maxLength: Math.min(s.maxLength ?? 24, min + 24) });
    // Long strings too, up to the stated maximum (or well past any limit the server keeps and does not state).
    const max = s.maxLength ?? 1024;
    const long = fc
      .integer({ min: Math.max(min, Math.min(max, 100)), max })
      .chain((n) => fc.string({ unit: 'grapheme-ascii', minLength: n, maxLength: n }));
    const free = fc.oneof({ arbitrary: short, weight: 4 }, { arbitrary: long, weight: 1 });
    if (s.pattern === undefined) return free;
    // Mostly what the pattern spells out; some free text too (non-ASCII keys), kept only where it matches.
    const spelled = fc.stringMatching(new RegExp(s.pattern));
    return fc.oneof({ arbitrary: spelled, weight: 4 }, { arbitrary: free, weight: 1 }).filter((v) => v.isWellFormed());
  }

  private validObject(s: Schema): fc.Arbitrary<unknown> {
    const props = Object.entries(s.properties ?? {});
    if (props.length === 0) {
      if (s.additionalProperties === false) return fc.constant({});
      // A map (`{ [name]: schema }`): names valid by propertyNames, values by additionalProperties.
      const names = s.propertyNames ? (this.valid(s.propertyNames) as fc.Arbitrary<string>) : fc.string({ maxLength: 8 });
      const values = isObject(s.additionalProperties) ? this.valid(s.additionalProperties) : fc.jsonValue({ maxDepth: 1 });
      return fc.dictionary(names, values, { maxKeys: 3 });
    }
    return fc.record(Object.fromEntries(props.map(([k, p]) => [k, this.valid(p)])), { requiredKeys: s.required ?? [] });
  }

  /** A parameter's values on the wire, valid by its schema. `hints` are extra valid values to mix in. */
  validWire(p: Parameter, hints: readonly string[] = []): fc.Arbitrary<string> {
    const s = this.resolve(p.schema);
    const base = this.valid(s).map((v) => (Array.isArray(v) ? v.join(',') : typeof v === 'string' ? v : String(v)));
    const options = [base, ...(hints.length ? [fc.constantFrom(...hints), fc.constantFrom(...hints)] : [])];
    const arb = viable(
      options.map((o) => o.map((v) => (p.in === 'header' ? v.replace(/\s/g, ' ').trim() : v))),
      (v) => this.transportable(p, v) && this.checkWire(p, v) === undefined,
    );
    if (!arb) throw new Error(`openapi-arbitraries: no valid value of ${p.in} parameter ${p.name} reaches the server`);
    return arb;
  }

  /** Whether `v` reaches the server as is: header values HTTP carries unchanged, path segments URL parsers keep. */
  private transportable(p: Parameter, v: string): boolean {
    if (p.in === 'header') return v === '' || HEADER_SAFE.test(v);
    // An empty segment is another path, and `.`/`..` are removed by URL parsers even when percent-encoded.
    if (p.in === 'path') return v !== '' && v !== '.' && v !== '..' && v.isWellFormed();
    // The documented convention for query parameters: an empty value counts as absent.
    return v !== '' && v.isWellFormed();
  }

  // ---------------------------------------------------------------------------------------------- invalid values

  /**
   * Values invalid by `schema` in one way, or undefined when no value can be. `wire`: only strings (and lists of
   * them), as a parameter travels, so a wrong JSON type is not a way to break it.
   */
  invalid(schema: Schema, wire = false): fc.Arbitrary<unknown> | undefined {
    const s = this.resolve(schema);
    // Kept per schema: judging the options of a large one (the policy document) takes seconds, and several
    // operations share it by reference.
    const cache = wire ? this.invalidWireCache : this.invalidCache;
    if (!cache.has(s))
      cache.set(
        s,
        viable(this.invalidOptions(s, wire), (v) => this.check(s, v) !== undefined),
      );
    return cache.get(s);
  }

  /** Ways to break `s`, each an arbitrary that mostly (not always: see {@link viable}) does. */
  private invalidOptions(s: Schema, wire: boolean): fc.Arbitrary<unknown>[] {
    const options: fc.Arbitrary<unknown>[] = [];
    if (s.enum || 'const' in s)
      options.push(wire ? fc.string({ maxLength: 10 }) : fc.oneof(fc.string({ maxLength: 10 }), fc.integer()));
    if (s.type !== undefined && !wire) options.push(fc.constantFrom<unknown>('x', 7, 1.5, true, null, [], {}));
    if (typeof s.pattern === 'string') {
      options.push(
        fc.oneof(fc.string({ maxLength: 20 }), fc.string({ unit: 'grapheme', maxLength: 20 })).filter((v) => v.isWellFormed()),
      );
    }
    if (s.minLength) options.push(fc.constant(''));
    if (s.maxLength !== undefined) options.push(fc.constant('a'.repeat(s.maxLength + 1)));
    const bytes = s['x-strata-max-utf8-bytes'];
    if (bytes !== undefined) options.push(fc.constant('é'.repeat(Math.floor(bytes / 2) + 1)));
    if (s.not?.enum) options.push(fc.constantFrom(...s.not.enum));
    if (s.minimum !== undefined && !wire) options.push(fc.constant(s.minimum - 1));
    if (s.exclusiveMinimum !== undefined && !wire) options.push(fc.constant(s.exclusiveMinimum));
    if (s.maximum !== undefined && !wire) options.push(fc.constant(s.maximum + 1));
    if (s.type === 'integer' && !wire) options.push(fc.constant(1.5));
    if (s.items) {
      const bad = this.invalid(s.items, wire);
      if (bad) options.push(fc.tuple(fc.array(this.valid(s.items), { maxLength: 2 }), bad).map(([a, b]) => [...a, b]));
    }
    if (s.maxItems !== undefined && s.items) {
      options.push(fc.array(this.valid(s.items), { minLength: s.maxItems + 1, maxLength: s.maxItems + 1 }));
    }
    if (s.minItems) options.push(fc.array(this.valid(s.items ?? {}), { maxLength: s.minItems - 1 }));
    if ((s.type === 'object' || s.properties) && !wire) options.push(...this.invalidObject(s));
    for (const b of [...(s.anyOf ?? []), ...(s.oneOf ?? [])]) {
      const bad = this.invalid(b, wire);
      if (bad) options.push(bad);
    }
    return options;
  }

  private invalidObject(s: Schema): fc.Arbitrary<unknown>[] {
    const out: fc.Arbitrary<unknown>[] = [];
    const whole = this.validObject(s) as fc.Arbitrary<Record<string, unknown>>;
    if (s.required?.length) {
      const without = (o: Record<string, unknown>, k: string) => Object.fromEntries(Object.entries(o).filter(([n]) => n !== k));
      out.push(fc.tuple(whole, fc.constantFrom(...s.required)).map(([o, k]) => without(o, k)));
    }
    if (s.additionalProperties === false) out.push(whole.map((o) => ({ ...o, unexpected: 1 })));
    const breakable = Object.entries(s.properties ?? {}).flatMap(([k, p]) => {
      const bad = this.invalid(p);
      return bad ? [fc.tuple(whole, bad).map(([o, b]) => ({ ...o, [k]: b }))] : [];
    });
    if (breakable.length) out.push(fc.oneof(...breakable));
    return out;
  }

  /** A parameter's values on the wire that break its schema (and that reach the server as they are). */
  invalidWire(p: Parameter): fc.Arbitrary<string> | undefined {
    const s = this.resolve(p.schema);
    const types = Array.isArray(s.type) ? s.type : [s.type];
    let arb: fc.Arbitrary<string> | undefined;
    if (types.includes('integer')) {
      const bounds = [
        s.minimum === undefined ? [] : [`${s.minimum - 1}`],
        s.maximum === undefined ? [] : [`${s.maximum + 1}`],
      ].flat();
      arb = fc.constantFrom('abc', '1.5', '-1', '0x10', ...bounds);
    } else arb = this.invalid(s, true)?.map((v) => (Array.isArray(v) ? v.map(String).join(',') : String(v)));
    return arb && viable([arb], (v) => v !== '' && this.transportable(p, v) && this.checkWire(p, v) !== undefined);
  }
}

/**
 * The options that can yield a value `accept`s (judged on a fixed sample), each filtered by it, as one arbitrary;
 * undefined when none can. A filter that can never pass would spin forever instead of failing.
 */
function viable<T>(options: fc.Arbitrary<T>[], accept: (v: T) => boolean): fc.Arbitrary<T> | undefined {
  const kept = options.filter((o) => fc.sample(o, { numRuns: 60, seed: 7 }).some(accept));
  return kept.length ? fc.oneof(...kept.map((o) => o.filter(accept))) : undefined;
}
