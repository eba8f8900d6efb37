/* prelude.js: the JavaScript that gives a worker Node-like globals (docs/quickjs.md).
 * Owns: console (util.inspect-style formatting), timers on a virtual clock, queueMicrotask,
 *   process (exit, exitCode, argv, env, stdout/stderr.write, nextTick), performance.now.
 * Trusts: nothing; it runs inside the sandbox with the guest. It holds no authority: its only
 *   natives write into the worker's capped output buffers, end the run, and read clocks.
 * Invariant: after this comment the source is a single function expression. The zygote evaluates
 *   it once, calling it with the native object (never reachable from guest code), before any fork; every worker
 *   inherits the result and drives timers and error reports through the returned hooks object.
 *   Nothing here may capture per-process state at evaluation time that a run would see (time,
 *   randomness): begin() refreshes what must be the run's own.
 *   Formatting follows Node's util.inspect defaults (depth 2, breakLength 80, compact 3,
 *   maxArrayLength 100); it is an independent implementation of that behaviour.
 * Built into the worker binary by embed_js.py (meson.build), so it is part of the engine identity. */
(function (native) {
'use strict';
const O = Object, A = Array;
const keysOf = O.keys, gopd = O.getOwnPropertyDescriptor, getProto = O.getPrototypeOf,
      ownSymbols = O.getOwnPropertySymbols, ownNames = O.getOwnPropertyNames,
      isArray = A.isArray, defineProp = O.defineProperty;
const hasOwn = (o, k) => O.prototype.hasOwnProperty.call(o, k);
const isEnum = (o, k) => O.prototype.propertyIsEnumerable.call(o, k);
const objToString = (o) => O.prototype.toString.call(o);
const fnToString = Function.prototype.toString;
const write = native.write, elapsed = native.elapsed;
const brand = (fn) => (v) => { try { fn.call(v); return true; } catch (e) { return false; } };
const isMap = brand(gopd(Map.prototype, 'size').get);
const isSet = brand(gopd(Set.prototype, 'size').get);
const isDate = brand(Date.prototype.getTime);
const isRegExp = brand(gopd(RegExp.prototype, 'source').get);
const isAB = brand(gopd(ArrayBuffer.prototype, 'byteLength').get);
const weakMapHas = WeakMap.prototype.has, weakSetHas = WeakSet.prototype.has;
const isWeakMap = (v) => { try { weakMapHas.call(v, {}); return true; } catch (e) { return false; } };
const isWeakSet = (v) => { try { weakSetHas.call(v, {}); return true; } catch (e) { return false; } };
const taTag = gopd(getProto(Uint8Array.prototype), Symbol.toStringTag).get;
const typedArrayName = (v) => taTag.call(v);
const isPromise = (v) => native.promiseState(v) >= 0;
const isError = native.isError;
const boxes = [[Number, 'Number'], [String, 'String'], [Boolean, 'Boolean'],
               [BigInt, 'BigInt'], [Symbol, 'Symbol']];
const AsyncFunctionProto = getProto(async function () {});
const GeneratorFunctionProto = getProto(function* () {});
const AsyncGeneratorFunctionProto = getProto(async function* () {});
const customInspect = Symbol.for('nodejs.util.inspect.custom');
const kObject = 0, kArrayItem = 1, kArrayExtras = 2;
const keyRe = /^[a-zA-Z_][a-zA-Z_0-9]*$/;

function escapeChar(c) {
  switch (c) {
    case 8: return '\\b'; case 9: return '\\t'; case 10: return '\\n';
    case 12: return '\\f'; case 13: return '\\r'; case 39: return "\\'"; case 92: return '\\\\';
  }
  return '\\x' + (c < 16 ? '0' : '') + c.toString(16).toUpperCase();
}
function strEscape(str) {
  let quote = "'";
  if (str.includes("'")) {
    if (!str.includes('"')) quote = '"';
    else if (!str.includes('`') && !str.includes('${')) quote = '`';
  }
  let out = '', last = 0;
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    if ((c === 39 && quote === "'") || c === 92 || c < 32 || (c > 126 && c < 160)) {
      out += str.slice(last, i) + escapeChar(c);
      last = i + 1;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      if (c <= 0xdbff && i + 1 < str.length) {
        const d = str.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { i++; continue; }
      }
      out += str.slice(last, i) + '\\u' + c.toString(16);
      last = i + 1;
    }
  }
  return quote + out + str.slice(last) + quote;
}
function formatNumber(n) { return O.is(n, -0) ? '-0' : `${n}`; }
function formatPrimitive(v, ctx) {
  switch (typeof v) {
    case 'string': {
      let trailer = '';
      if (v.length > ctx.maxStringLength) {
        const rest = v.length - ctx.maxStringLength;
        v = v.slice(0, ctx.maxStringLength);
        trailer = `... ${rest} more character${rest > 1 ? 's' : ''}`;
      }
      if (v.length > 16 && v.length > ctx.breakLength - ctx.indentationLvl - 4) {
        const lines = v.split(/(?<=\n)/);
        return lines.map(strEscape).join(` +\n${' '.repeat(ctx.indentationLvl + 2)}`) + trailer;
      }
      return strEscape(v) + trailer;
    }
    case 'number': return formatNumber(v);
    case 'bigint': return `${v}n`;
    case 'boolean': return `${v}`;
    case 'undefined': return 'undefined';
  }
  return Symbol.prototype.toString.call(v);
}
function isInstance(o, c) { try { return o instanceof c; } catch (e) { return false; } }
function constructorName(obj) {
  const first = obj;
  while (obj) {
    const d = gopd(obj, 'constructor');
    if (d !== undefined && typeof d.value === 'function' && d.value.name !== '' &&
        isInstance(first, d.value))
      return String(d.value.name);
    obj = getProto(obj);
  }
  return null;
}
function prefixOf(ctor, tag, fallback, size = '') {
  if (ctor === null) {
    if (tag !== '' && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
    return `[${fallback}${size}: null prototype] `;
  }
  let r = `${ctor}${size} `;
  if (tag !== '') {
    const pos = ctor.indexOf(tag);
    if (pos === -1) r += `[${tag}] `;
    else {
      const end = pos + tag.length;
      if (end !== ctor.length && ctor[end] === ctor[end].toLowerCase()) r += `[${tag}] `;
    }
  }
  return r;
}
function getKeys(v) {
  const keys = keysOf(v);
  for (const s of ownSymbols(v)) if (isEnum(v, s)) keys.push(s);
  return keys;
}
function nonIndexKeys(v) {
  const out = [];
  for (const k of keysOf(v)) { if (!/^(0|[1-9][0-9]*)$/.test(k) || +k >= 4294967295) out.push(k); }
  for (const s of ownSymbols(v)) if (isEnum(v, s)) out.push(s);
  return out;
}
function functionBase(v, ctor, tag) {
  let src = '';
  try { src = fnToString.call(v); } catch (e) {}
  if (src.startsWith('class') && src.endsWith('}')) {
    const name = (hasOwn(v, 'name') && v.name) || '(anonymous)';
    let b = `class ${name}`;
    if (ctor !== 'Function' && ctor !== null) b += ` [${ctor}]`;
    if (tag !== '' && ctor !== tag) b += ` [${tag}]`;
    if (ctor !== null) { const sup = getProto(v).name; if (sup) b += ` extends ${sup}`; }
    else b += ' extends [null prototype]';
    return `[${b}]`;
  }
  const p = getProto(v);
  let type = 'Function';
  if (p === GeneratorFunctionProto) type = 'GeneratorFunction';
  else if (p === AsyncFunctionProto) type = 'AsyncFunction';
  else if (p === AsyncGeneratorFunctionProto) type = 'AsyncGeneratorFunction';
  let b = `[${type}`;
  if (ctor === null) b += ' (null prototype)';
  if (v.name === '' || typeof v.name !== 'string') b += ' (anonymous)';
  else b += `: ${v.name}`;
  b += ']';
  if (ctor !== type && ctor !== null) b += ` ${ctor}`;
  if (tag !== '' && ctor !== tag) b += ` [${tag}]`;
  return b;
}
function formatError(err, ctor, tag, ctx, keys) {
  let name, message, frames;
  try { name = err.name; } catch (e) {}
  try { message = err.message; } catch (e) {}
  try { frames = err.stack; } catch (e) {}
  name = name === undefined ? 'Error' : String(name);
  message = message === undefined ? '' : String(message);
  let head = message === '' ? name : `${name}: ${message}`;
  for (const k of ['stack', 'message', 'name']) { const i = keys.indexOf(k); if (i !== -1) keys.splice(i, 1); }
  if (hasOwn(err, 'cause') && !keys.includes('cause')) keys.push('cause');
  try { if (isArray(err.errors) && hasOwn(err, 'errors') && !keys.includes('errors')) keys.push('errors'); } catch (e) {}
  /* A subclass whose name was not set: say both, as Node does ("MyErr [Error]: x"). */
  if (ctor === null || (name.endsWith('Error') && ctor !== name)) {
    const p = prefixOf(ctor, tag, 'Error').slice(0, -1);
    if (p !== name) head = (p.includes(name) ? p : `${p} [${name}]`) + head.slice(name.length);
  }
  let out;
  /* Ten frames at most, as Node's default Error.stackTraceLimit (QuickJS records them all). */
  if (typeof frames === 'string' && frames.trim() !== '')
    out = `${head}\n${frames.replace(/\n+$/, '').split('\n').slice(0, 10).join('\n')}`;
  else out = `[${head}]`;
  if (ctx.indentationLvl !== 0) out = out.split('\n').join(`\n${' '.repeat(ctx.indentationLvl)}`);
  return out;
}
function boxedBase(v, ctor, tag, keys) {
  for (const [C, type] of boxes) {
    let prim;
    try { prim = C.prototype.valueOf.call(v); } catch (e) { continue; }
    if (type === 'String') keys.splice(0, prim.length);
    let b = `[${type}`;
    if (type !== ctor) b += ctor === null ? ' (null prototype)' : ` (${ctor})`;
    b += `: ${formatPrimitive(prim, { maxStringLength: 10000, breakLength: Infinity, indentationLvl: 0 })}]`;
    if (tag !== '' && tag !== ctor) b += ` [${tag}]`;
    return b;
  }
  return undefined;
}
function formatValue(ctx, v, recurseTimes) {
  if (typeof v !== 'object' && typeof v !== 'function') return formatPrimitive(v, ctx);
  if (v === null) return 'null';
  if (ctx.customInspect) {
    let custom;
    try { custom = v[customInspect]; } catch (e) {}
    if (typeof custom === 'function' && custom !== inspect) {
      const ret = custom.call(v, ctx.depth - recurseTimes, { ...ctx.user }, inspect);
      if (ret !== v) {
        if (typeof ret !== 'string') return formatValue(ctx, ret, recurseTimes);
        return ret.split('\n').join(`\n${' '.repeat(ctx.indentationLvl)}`);
      }
    }
  }
  if (ctx.seen.includes(v)) {
    let idx = 1;
    if (ctx.circular === undefined) { ctx.circular = new Map([[v, idx]]); }
    else { idx = ctx.circular.get(v); if (idx === undefined) { idx = ctx.circular.size + 1; ctx.circular.set(v, idx); } }
    return `[Circular *${idx}]`;
  }
  return formatRaw(ctx, v, recurseTimes);
}
function formatRaw(ctx, v, recurseTimes) {
  const ctor = constructorName(v);
  let tag = '';
  try { tag = v[Symbol.toStringTag]; } catch (e) {}
  if (typeof tag !== 'string' || (tag !== '' && isEnum(v, Symbol.toStringTag))) tag = '';
  let base = '', formatter = () => [], braces, extras = kObject, keys, extraKeys, plain = true;
  if (Symbol.iterator in v || ctor === null) {
    plain = false;
    const ta = typedArrayName(v);
    if (isArray(v)) {
      const prefix = (ctor !== 'Array' || tag !== '') ? prefixOf(ctor, tag, 'Array', `(${v.length})`) : '';
      keys = nonIndexKeys(v);
      braces = [`${prefix}[`, ']'];
      if (v.length === 0 && keys.length === 0) return `${braces[0]}]`;
      extras = kArrayExtras;
      formatter = formatArray;
    } else if (isSet(v)) {
      const prefix = prefixOf(ctor, tag, 'Set', `(${v.size})`);
      keys = getKeys(v);
      formatter = formatSet;
      if (v.size === 0 && keys.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
    } else if (isMap(v)) {
      const prefix = prefixOf(ctor, tag, 'Map', `(${v.size})`);
      keys = getKeys(v);
      formatter = formatMap;
      if (v.size === 0 && keys.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
    } else if (ta !== undefined) {
      keys = nonIndexKeys(v);
      const prefix = prefixOf(ctor, ctor === ta ? '' : tag, ta, `(${v.length})`);
      braces = [`${prefix}[`, ']'];
      if (v.length === 0 && keys.length === 0) return `${braces[0]}]`;
      formatter = formatTypedArray;
      extras = kArrayExtras;
    } else plain = true;
  }
  if (plain) {
    keys = getKeys(v);
    braces = ['{', '}'];
    let b;
    if (typeof v === 'function') {
      base = functionBase(v, ctor, tag);
      if (keys.length === 0) return base;
    } else if (ctor === 'Object') {
      if (objToString(v) === '[object Arguments]') braces[0] = '[Arguments] {';
      else if (tag !== '') braces[0] = `${prefixOf(ctor, tag, 'Object')}{`;
      if (keys.length === 0) return `${braces[0]}}`;
    } else if (isRegExp(v)) {
      base = RegExp.prototype.toString.call(v);
      const prefix = prefixOf(ctor, tag, 'RegExp');
      if (prefix !== 'RegExp ') base = prefix + base;
      if (keys.length === 0 || recurseTimes > ctx.depth) return base;
    } else if (isDate(v)) {
      base = Number.isNaN(Date.prototype.getTime.call(v)) ? Date.prototype.toString.call(v)
                                                            : Date.prototype.toISOString.call(v);
      const prefix = prefixOf(ctor, tag, 'Date');
      if (prefix !== 'Date ') base = prefix + base;
      if (keys.length === 0) return base;
    } else if (isError(v)) {
      base = formatError(v, ctor, tag, ctx, keys);
      if (keys.length === 0) return base;
    } else if (isAB(v)) {
      braces[0] = `${prefixOf(ctor, tag, 'ArrayBuffer')}{`;
      formatter = formatArrayBuffer;
      extraKeys = ['byteLength'];
    } else if (isPromise(v)) {
      braces[0] = `${prefixOf(ctor, tag, 'Promise')}{`;
      formatter = formatPromise;
    } else if (isWeakSet(v)) {
      braces[0] = `${prefixOf(ctor, tag, 'WeakSet')}{`;
      formatter = () => ['<items unknown>'];
    } else if (isWeakMap(v)) {
      braces[0] = `${prefixOf(ctor, tag, 'WeakMap')}{`;
      formatter = () => ['<items unknown>'];
    } else if ((b = boxedBase(v, ctor, tag, keys)) !== undefined) {
      base = b;
      if (keys.length === 0) return base;
    } else {
      const p = prefixOf(ctor, tag, 'Object');
      if (keys.length === 0) return `${p}{}`;
      braces[0] = `${p}{`;
    }
  }
  if (recurseTimes > ctx.depth) {
    let name = prefixOf(ctor, tag, 'Object').slice(0, -1);
    if (ctor !== null) name = `[${name}]`;
    return name;
  }
  recurseTimes += 1;
  ctx.seen.push(v);
  ctx.currentDepth = recurseTimes;
  const output = formatter(ctx, v, recurseTimes);
  if (extraKeys !== undefined)
    for (const k of extraKeys) {
      ctx.indentationLvl += 2;
      const s = formatValue(ctx, v[k], recurseTimes);
      ctx.indentationLvl -= 2;
      output.push(`${k}: ${s}`);
    }
  for (const k of keys) output.push(formatProperty(ctx, v, recurseTimes, k, extras));
  if (ctx.circular !== undefined) {
    const idx = ctx.circular.get(v);
    if (idx !== undefined) base = base === '' ? `<ref *${idx}>` : `<ref *${idx}> ${base}`;
  }
  ctx.seen.pop();
  return reduceToSingleString(ctx, output, base, braces, extras, recurseTimes, v);
}
function remainingText(n) { return `... ${n} more item${n > 1 ? 's' : ''}`; }
function formatArray(ctx, v, recurseTimes) {
  const len = Math.min(ctx.maxArrayLength, v.length);
  const output = [];
  for (let i = 0; i < len; i++) {
    const d = gopd(v, i);
    if (d === undefined) return formatSparse(ctx, v, recurseTimes, len, output, i);
    output.push(formatProperty(ctx, v, recurseTimes, i, kArrayItem, d));
  }
  if (v.length > len) output.push(remainingText(v.length - len));
  return output;
}
function formatSparse(ctx, v, recurseTimes, maxLength, output, i) {
  const keys = keysOf(v);
  let index = i;
  for (; i < keys.length && output.length < maxLength; i++) {
    const key = keys[i], n = +key;
    if (n > 2 ** 32 - 2) break;
    if (`${index}` !== key) {
      if (!/^(0|[1-9][0-9]*)$/.test(key)) break;
      const empty = n - index;
      output.push(`<${empty} empty item${empty > 1 ? 's' : ''}>`);
      index = n;
      if (output.length === maxLength) break;
    }
    output.push(formatProperty(ctx, v, recurseTimes, key, kArrayItem));
    index++;
  }
  const rest = v.length - index;
  if (output.length !== maxLength) {
    if (rest > 0) output.push(`<${rest} empty item${rest > 1 ? 's' : ''}>`);
  } else if (rest > 0) output.push(remainingText(rest));
  return output;
}
function formatTypedArray(ctx, v) {
  const len = Math.min(ctx.maxArrayLength, v.length);
  const output = [];
  for (let i = 0; i < len; i++) output.push(typeof v[i] === 'bigint' ? `${v[i]}n` : formatNumber(v[i]));
  if (v.length > len) output.push(remainingText(v.length - len));
  return output;
}
function formatArrayBuffer(ctx, v) {
  const bytes = new Uint8Array(v);
  const n = Math.min(ctx.maxArrayLength, bytes.length);
  let s = '';
  for (let i = 0; i < n; i++) s += (i ? ' ' : '') + (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
  if (bytes.length > n) { const r = bytes.length - n; s += ` ... ${r} more byte${r > 1 ? 's' : ''}`; }
  return [`[Uint8Contents]: <${s}>`];
}
function formatSet(ctx, v, recurseTimes) {
  const output = [];
  ctx.indentationLvl += 2;
  let i = 0;
  for (const x of v) { if (i++ >= ctx.maxArrayLength) break; output.push(formatValue(ctx, x, recurseTimes)); }
  if (v.size > ctx.maxArrayLength) output.push(remainingText(v.size - ctx.maxArrayLength));
  ctx.indentationLvl -= 2;
  return output;
}
function formatMap(ctx, v, recurseTimes) {
  const output = [];
  ctx.indentationLvl += 2;
  let i = 0;
  for (const [k, x] of v) {
    if (i++ >= ctx.maxArrayLength) break;
    output.push(`${formatValue(ctx, k, recurseTimes)} => ${formatValue(ctx, x, recurseTimes)}`);
  }
  if (v.size > ctx.maxArrayLength) output.push(remainingText(v.size - ctx.maxArrayLength));
  ctx.indentationLvl -= 2;
  return output;
}
function formatPromise(ctx, v, recurseTimes) {
  const state = native.promiseState(v);
  if (state === 0) return ['<pending>'];
  ctx.indentationLvl += 2;
  const s = formatValue(ctx, native.promiseResult(v), recurseTimes);
  ctx.indentationLvl -= 2;
  return [state === 2 ? `<rejected> ${s}` : s];
}
function formatProperty(ctx, v, recurseTimes, key, type, desc) {
  desc = desc || gopd(v, key) || { value: v[key], enumerable: true };
  let str;
  if (desc.value !== undefined) {
    ctx.indentationLvl += 2;
    str = formatValue(ctx, desc.value, recurseTimes);
    ctx.indentationLvl -= 2;
  } else if (desc.get !== undefined) str = desc.set !== undefined ? '[Getter/Setter]' : '[Getter]';
  else if (desc.set !== undefined) str = '[Setter]';
  else str = 'undefined';
  if (type === kArrayItem) return str;
  let name;
  if (typeof key === 'symbol') name = `[${Symbol.prototype.toString.call(key)}]`;
  else if (keyRe.test(key)) name = key === '__proto__' ? "['__proto__']" : key;
  else name = strEscape(key);
  if (desc.enumerable === false) name = `[${name}]`;
  return `${name}: ${str}`;
}
function groupArrayElements(ctx, output, value) {
  let totalLength = 0, maxLength = 0, outputLength = output.length;
  if (ctx.maxArrayLength < output.length) outputLength--;
  const sep = 2, dataLen = new A(outputLength);
  for (let i = 0; i < outputLength; i++) {
    const len = output[i].length;
    dataLen[i] = len;
    totalLength += len + sep;
    if (maxLength < len) maxLength = len;
  }
  const actualMax = maxLength + sep;
  if (actualMax * 3 + ctx.indentationLvl < ctx.breakLength &&
      (totalLength / actualMax > 5 || maxLength <= 6)) {
    const averageBias = Math.sqrt(actualMax - totalLength / output.length);
    const biasedMax = Math.max(actualMax - 3 - averageBias, 1);
    const columns = Math.min(Math.round(Math.sqrt(2.5 * biasedMax * outputLength) / biasedMax),
                             Math.floor((ctx.breakLength - ctx.indentationLvl) / actualMax),
                             ctx.compact * 4, 15);
    if (columns <= 1) return output;
    const tmp = [], maxLineLength = [];
    for (let i = 0; i < columns; i++) {
      let m = 0;
      for (let j = i; j < output.length; j += columns) if (dataLen[j] > m) m = dataLen[j];
      maxLineLength.push(m + sep);
    }
    let padStart = true;
    if (value !== undefined)
      for (let i = 0; i < output.length; i++)
        if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') { padStart = false; break; }
    for (let i = 0; i < outputLength; i += columns) {
      const max = Math.min(i + columns, outputLength);
      let str = '', j = i;
      for (; j < max - 1; j++) {
        const cell = `${output[j]}, `;
        str += padStart ? cell.padStart(maxLineLength[j - i], ' ') : cell.padEnd(maxLineLength[j - i], ' ');
      }
      str += padStart ? output[j].padStart(maxLineLength[j - i] - sep, ' ') : output[j];
      tmp.push(str);
    }
    if (ctx.maxArrayLength < output.length) tmp.push(output[outputLength]);
    return tmp;
  }
  return output;
}
function isBelowBreakLength(ctx, output, start, base) {
  let total = output.length + start;
  if (total + output.length > ctx.breakLength) return false;
  for (const s of output) { total += s.length; if (total > ctx.breakLength) return false; }
  return base === '' || !base.includes('\n');
}
function reduceToSingleString(ctx, output, base, braces, extras, recurseTimes, value) {
  const entries = output.length;
  if (extras === kArrayExtras && entries > 6) output = groupArrayElements(ctx, output, value);
  if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
    const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
    if (isBelowBreakLength(ctx, output, start, base)) {
      const joined = output.join(', ');
      if (!joined.includes('\n')) return `${base ? `${base} ` : ''}${braces[0]} ${joined} ${braces[1]}`;
    }
  }
  const ind = `\n${' '.repeat(ctx.indentationLvl)}`;
  return `${base ? `${base} ` : ''}${braces[0]}${ind}  ${output.join(`,${ind}  `)}${ind}${braces[1]}`;
}
function inspect(value, opts) {
  const ctx = { seen: [], indentationLvl: 0, currentDepth: 0, depth: 2, breakLength: 80,
                compact: 3, maxArrayLength: 100, maxStringLength: 10000, customInspect: true,
                circular: undefined, user: {} };
  if (opts !== null && typeof opts === 'object') {
    for (const k of ['depth', 'breakLength', 'compact', 'maxArrayLength', 'maxStringLength', 'customInspect'])
      if (opts[k] !== undefined) ctx[k] = opts[k];
    ctx.user = opts;
  }
  if (ctx.depth === null) ctx.depth = Infinity;
  if (ctx.maxArrayLength === null) ctx.maxArrayLength = Infinity;
  if (ctx.maxStringLength === null) ctx.maxStringLength = Infinity;
  if (typeof ctx.compact !== 'number' || ctx.compact < 1) ctx.compact = 3;
  return formatValue(ctx, value, 0);
}
function hasBuiltInToString(v) {
  try {
    if (typeof v.toString !== 'function') return true;
    if (hasOwn(v, 'toString')) return false;
    let p = v;
    do { p = getProto(p); } while (p !== null && !hasOwn(p, 'toString'));
    const d = p && gopd(p, 'constructor');
    return !!d && typeof d.value === 'function' &&
      ['Object', 'Error', 'Array', 'Date', 'RegExp', 'Function', 'Map', 'Set'].includes(d.value.name);
  } catch (e) { return true; }
}
function format(args) {
  const first = args[0];
  let a = 0, str = '', join = '';
  if (typeof first === 'string') {
    if (args.length === 1) return first;
    let last = 0, tmp;
    for (let i = 0; i < first.length - 1; i++) {
      if (first.charCodeAt(i) !== 37) continue;
      const next = first.charCodeAt(++i);
      if (a + 1 !== args.length) {
        switch (next) {
          case 115: { const x = args[++a];
            if (typeof x === 'number') tmp = formatNumber(x);
            else if (typeof x === 'bigint') tmp = `${x}n`;
            else if (typeof x !== 'object' || x === null || !hasBuiltInToString(x)) tmp = String(x);
            else tmp = inspect(x, { depth: 0 });
            break; }
          case 106: try { tmp = JSON.stringify(args[++a]); } catch (e) { tmp = '[Circular]'; } break;
          case 100: { const x = args[++a];
            tmp = typeof x === 'bigint' ? `${x}n` : typeof x === 'symbol' ? 'NaN' : formatNumber(Number(x)); break; }
          case 79: tmp = inspect(args[++a]); break;
          case 111: tmp = inspect(args[++a], { depth: 4 }); break;
          case 105: { const x = args[++a];
            tmp = typeof x === 'bigint' ? `${x}n` : typeof x === 'symbol' ? 'NaN' : formatNumber(parseInt(x)); break; }
          case 102: { const x = args[++a]; tmp = typeof x === 'symbol' ? 'NaN' : formatNumber(parseFloat(x)); break; }
          case 99: a += 1; tmp = ''; break;
          case 37: str += first.slice(last, i); last = i + 1; continue;
          default: continue;
        }
        if (last !== i - 1) str += first.slice(last, i - 1);
        str += tmp;
        last = i + 1;
      } else if (next === 37) {
        str += first.slice(last, i);
        last = i + 1;
      }
    }
    if (last !== 0) {
      a++;
      join = ' ';
      if (last < first.length) str += first.slice(last);
    }
  }
  while (a < args.length) {
    const v = args[a];
    str += join + (typeof v !== 'string' ? inspect(v) : v);
    join = ' ';
    a++;
  }
  return str;
}

/* ---- console ---- */
let groupIndent = '';
function emit(fd, text) {
  if (groupIndent !== '') text = groupIndent + text.split('\n').join(`\n${groupIndent}`);
  write(fd, text + '\n');
}
const counts = new Map(), timers = new Map();
function timeText(label) {
  const ms = now() - timers.get(label);
  return `${label}: ${ms >= 1000 ? `${(ms / 1000).toFixed(3)}s` : `${+ms.toFixed(3)}ms`}`;
}
const console = {
  log(...args) { emit(1, format(args)); },
  info(...args) { emit(1, format(args)); },
  debug(...args) { emit(1, format(args)); },
  error(...args) { emit(2, format(args)); },
  warn(...args) { emit(2, format(args)); },
  trace(...args) {
    const frames = (new Error().stack || '').split('\n').slice(1).join('\n').replace(/\n+$/, '');
    emit(2, `Trace${args.length ? ': ' + format(args) : ''}${frames ? '\n' + frames : ''}`);
  },
  dir(v, opts) { emit(1, inspect(v, opts)); },
  dirxml(...args) { emit(1, format(args)); },
  table(...args) { emit(1, format(args)); },
  assert(ok, ...args) {
    if (ok) return;
    if (typeof args[0] === 'string') { args[0] = `Assertion failed: ${args[0]}`; emit(2, format(args)); }
    else emit(2, format(['Assertion failed', ...args]));
  },
  count(label = 'default') { label = `${label}`; const n = (counts.get(label) || 0) + 1; counts.set(label, n); emit(1, `${label}: ${n}`); },
  countReset(label = 'default') { counts.delete(`${label}`); },
  time(label = 'default') { timers.set(`${label}`, now()); },
  timeEnd(label = 'default') { label = `${label}`; if (timers.has(label)) { emit(1, timeText(label)); timers.delete(label); } },
  timeLog(label = 'default', ...args) { label = `${label}`; if (timers.has(label)) emit(1, [timeText(label), ...args.map((x) => typeof x === 'string' ? x : inspect(x))].join(' ')); },
  group(...labels) { if (labels.length) emit(1, format(labels)); groupIndent += '  '; },
  groupCollapsed(...labels) { if (labels.length) emit(1, format(labels)); groupIndent += '  '; },
  groupEnd() { groupIndent = groupIndent.slice(0, -2); },
};

/* ---- timers on a virtual clock ---- */
let virtualNow = 0, seq = 0, nextId = 1, refCount = 0;
const heap = [], active = new Map();
function now() { const r = elapsed(); return r > virtualNow ? r : virtualNow; }
const before = (a, b) => a.due < b.due || (a.due === b.due && a.seq < b.seq);
function heapPush(t) {
  heap.push(t);
  let i = heap.length - 1;
  while (i > 0) { const p = (i - 1) >> 1; if (!before(heap[i], heap[p])) break; [heap[i], heap[p]] = [heap[p], heap[i]]; i = p; }
}
function heapPop() {
  const top = heap[0], last = heap.pop();
  if (heap.length > 0) {
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < heap.length && before(heap[l], heap[m])) m = l;
      if (r < heap.length && before(heap[r], heap[m])) m = r;
      if (m === i) break;
      [heap[i], heap[m]] = [heap[m], heap[i]];
      i = m;
    }
  }
  return top;
}
class Timeout {
  constructor(id) { defineProp(this, '_id', { value: id }); }
  ref() { const t = active.get(this._id); if (t && !t.ref) { t.ref = true; refCount++; } return this; }
  unref() { const t = active.get(this._id); if (t && t.ref) { t.ref = false; refCount--; } return this; }
  hasRef() { const t = active.get(this._id); return !!t && t.ref; }
  refresh() { const t = active.get(this._id); if (t) { t.cancelled = true; const n = { ...t, cancelled: false, seq: ++seq, due: now() + t.delay }; active.set(t.id, n); heapPush(n); } return this; }
  close() { clear(this); return this; }
  [Symbol.toPrimitive]() { return this._id; }
}
class Immediate extends Timeout {}
function schedule(fn, delay, args, repeat, Kind) {
  if (typeof fn !== 'function') throw new TypeError('The "callback" argument must be of type function');
  delay = Number(delay);
  if (!(delay >= 1 && delay <= 2147483647)) delay = Kind === Immediate ? 0 : 1;
  const id = nextId++;
  const t = { id, fn, args, delay, repeat, due: now() + delay, seq: ++seq, ref: true, cancelled: false };
  active.set(id, t);
  refCount++;
  heapPush(t);
  return new Kind(id);
}
function clear(h) {
  const id = (h instanceof Timeout) ? h._id : Number(h);
  const t = active.get(id);
  if (!t) return;
  t.cancelled = true;
  active.delete(id);
  if (t.ref) refCount--;
}
function settle() { while (heap.length && heap[0].cancelled) heapPop(); }
globalThis.setTimeout = function setTimeout(fn, delay, ...args) { return schedule(fn, delay, args, false, Timeout); };
globalThis.setInterval = function setInterval(fn, delay, ...args) { return schedule(fn, delay, args, true, Timeout); };
globalThis.setImmediate = function setImmediate(fn, ...args) { return schedule(fn, 0, args, false, Immediate); };
globalThis.clearTimeout = globalThis.clearInterval = globalThis.clearImmediate = function (h) { if (h != null) clear(h); };

/* ---- the rest of the globals ---- */
globalThis.queueMicrotask = function queueMicrotask(fn) {
  if (typeof fn !== 'function') throw new TypeError('The "callback" argument must be of type function');
  native.enqueue(fn);
};
const process = {
  argv: ['quickjs'], argv0: 'quickjs', execArgv: [], env: {}, platform: 'linux', exitCode: undefined,
  exit(code) {
    if (code === undefined) code = process.exitCode;
    native.exit(code === undefined ? 0 : Number(code) | 0);
  },
  nextTick(fn, ...args) {
    if (typeof fn !== 'function') throw new TypeError('The "callback" argument must be of type function');
    native.enqueue(args.length ? () => fn(...args) : fn);
  },
  stdout: { isTTY: false, write(s) { write(1, typeof s === 'string' ? s : String(s)); return true; } },
  stderr: { isTTY: false, write(s) { write(2, typeof s === 'string' ? s : String(s)); return true; } },
};
const hidden = (name, value) => defineProp(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
hidden('console', console);
hidden('process', process);
hidden('global', globalThis);
const perf = { now, timeOrigin: Date.now() };
hidden('performance', perf);

/* ---- hooks for the C event loop (jsrt.c) ---- */
return {
  uncaught(err, inPromise) { return `Uncaught ${inPromise ? '(in promise) ' : ''}${inspect(err)}`; },
  nextDue() { settle(); return refCount > 0 && heap.length ? heap[0].due : -1; },
  fireNext() {
    settle();
    const t = heapPop();
    if (t.due > virtualNow) virtualNow = t.due;
    if (t.repeat) { t.due = virtualNow + t.delay; t.seq = ++seq; heapPush(t); }
    else { active.delete(t.id); if (t.ref) refCount--; }
    t.fn.apply(undefined, t.args);
  },
  exitCode() { const c = process.exitCode; return c === undefined ? 0 : Number(c) | 0; },
  /* Just before the snippet: the prelude ran in the zygote, long before this run. */
  begin() { perf.timeOrigin = Date.now(); },
  /* In each worker, before READY: what a small run does (format a string and a number), so the
   * zygote's pages it writes are copied now, while the worker waits in the pool. */
  warmRun() { return format(['warm', 42]); },
  /* In the zygote, before any fork: walk the formatter and the parser once, so the shapes,
   * atoms and caches they build lazily exist before the workers do. No output, no state a
   * snippet can see. */
  warm() {
    format(['warm %s %d', 'x', 1, [1, 'a', { b: [2, 3] }], new Map([[1, 2]]), () => 1, 1.5, -0, null]);
    format([new Error('w')]);
    return JSON.stringify({ a: [1, 'b'] }) + (0.1).toFixed(2) + 'abc'.replace(/b/g, 'B');
  },
};
})
