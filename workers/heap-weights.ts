// A heap plan (py/onnxpipe/heap/plan.py) carried out for onnxruntime-web: each mount becomes a
// slice of a bundle file (a view of the bytes, or a Blob slice read by onnxruntime-web itself:
// never one buffer for a whole multi-gigabyte file), each planned weight is made here
// (MatMulNBits blocks expanded to the fp32 matrix the MatMul that replaces the node reads,
// fp16 MatMul weights widened to fp32). The result is the session's `externalData`.

/** Bytes ``start``..``end`` of the bundle file ``file``. */
export interface PlanSlice { file: string; start: number; end: number }

/** A weight to make: a [K, N] row-major fp32 matrix of ``(q - zero_point) * scale`` from a
 * MatMulNBits node's B [N, K/block, block*bits/8], scales [N, K/block] and optional packed
 * uint8 zero points (py/onnxpipe/heap/nbits.py, `expansion`). */
export interface NbitsSpec {
  kind: 'nbits_to_float32';
  out: string;
  k: number;
  n: number;
  bits: 4 | 8;
  block_size: number;
  b: PlanSlice;
  scales: PlanSlice;
  scales_dtype: 'float32' | 'float16';
  zero_points: PlanSlice | null;
}

/** An fp16 MatMul weight widened to fp32 (py/onnxpipe/heap/float16.py). */
export interface Float16Spec {
  kind: 'float16_to_float32';
  out: string;
  count: number;
  data: PlanSlice;
}

export interface HeapPlanWire {
  mounts: Record<string, PlanSlice>;
  materialize: (NbitsSpec | Float16Spec)[];
}

export interface ExternalDataEntry { path: string; data: Uint8Array | Blob }

type FileSource = (path: string) => Uint8Array | Blob;

// columns expanded together (nbitsToFloat32): a block of rows x TILE floats stays in cache
const TILE = 64;

/** The view or Blob slice of ``s``. */
function slice(get: FileSource, s: PlanSlice): Uint8Array | Blob {
  const data = get(s.file);
  const size = data instanceof Blob ? data.size : data.byteLength;
  if (s.start < 0 || s.end > size || s.start > s.end) {
    throw new Error(`${s.file}: bytes ${s.start}-${s.end} asked for, the file has ${size}`);
  }
  return data instanceof Blob ? data.slice(s.start, s.end) : data.subarray(s.start, s.end);
}

async function bytes(get: FileSource, s: PlanSlice): Promise<Uint8Array> {
  const part = slice(get, s);
  return part instanceof Blob ? new Uint8Array(await part.arrayBuffer()) : part;
}

const HALF = (() => {
  // every fp16 bit pattern as fp32: a 256 KB table beats per-value bit twiddling
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    table[h] = exp === 0 ? sign * frac * 2 ** -24
      : exp === 31 ? (frac ? NaN : sign * Infinity) : sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  return table;
})();

function floats(raw: Uint8Array, dtype: 'float32' | 'float16'): Float32Array {
  if (dtype === 'float32') {
    const own = raw.byteOffset % 4 ? raw.slice() : raw;   // Float32Array views need 4-byte alignment
    return new Float32Array(own.buffer, own.byteOffset, own.byteLength / 4);
  }
  const own = raw.byteOffset % 2 ? raw.slice() : raw;
  const halves = new Uint16Array(own.buffer, own.byteOffset, own.byteLength / 2);
  const out = new Float32Array(halves.length);
  for (let i = 0; i < halves.length; i++) out[i] = HALF[halves[i]!]!;
  return out;
}

/** The fp32 [K, N] matrix of a MatMulNBits node, as bytes. Per column n and block b: the
 * block's zero point and scale, then each of its weights (q - zp) * scale in fp32, the same
 * product onnxruntime's fallback computes on every call. */
export async function nbitsToFloat32(get: FileSource, spec: NbitsSpec): Promise<Uint8Array> {
  const { k, n, bits, block_size: block } = spec;
  if (k % block) throw new Error(`${spec.out}: K=${k} is not a multiple of block_size ${block}`);
  const blocks = k / block;
  const blockBytes = (block * bits) / 8;
  const b = await bytes(get, spec.b);
  const scales = floats(await bytes(get, spec.scales), spec.scales_dtype);
  const zps = spec.zero_points ? await bytes(get, spec.zero_points) : null;
  if (b.byteLength !== n * blocks * blockBytes || scales.length !== n * blocks) {
    throw new Error(`${spec.out}: B has ${b.byteLength} bytes and scales ${scales.length} values; ` +
      `[N=${n}, K=${k}] in blocks of ${block} at ${bits} bits needs ${n * blocks * blockBytes} and ${n * blocks}`);
  }
  const zpRow = bits === 4 ? Math.ceil(blocks / 2) : blocks;
  const middle = 1 << (bits - 1);
  const out = new Float32Array(k * n);
  // B is column by column and the output row by row: go through TILE columns at a time, block
  // by block, so the rows being written (block x TILE floats) stay in cache
  for (let first = 0; first < n; first += TILE) {
    const last = Math.min(n, first + TILE);
    for (let blk = 0; blk < blocks; blk++) {
      const top = blk * block * n;
      for (let col = first; col < last; col++) {
        const scale = scales[col * blocks + blk]!;
        let zp = middle;
        if (zps) {
          const packed = zps[col * zpRow + (bits === 4 ? blk >> 1 : blk)]!;
          zp = bits === 4 ? (blk & 1 ? packed >> 4 : packed & 0x0f) : packed;
        }
        const base = (col * blocks + blk) * blockBytes;
        let at = top + col;
        if (bits === 4) {
          for (let i = 0; i < blockBytes; i++, at += 2 * n) {
            const byte = b[base + i]!;
            out[at] = ((byte & 0x0f) - zp) * scale;
            out[at + n] = ((byte >> 4) - zp) * scale;
          }
        } else {
          for (let i = 0; i < blockBytes; i++, at += n) out[at] = (b[base + i]! - zp) * scale;
        }
      }
    }
  }
  return new Uint8Array(out.buffer);
}

/** An fp16 weight's values as fp32 bytes. */
export async function float16ToFloat32(get: FileSource, spec: Float16Spec): Promise<Uint8Array> {
  const raw = await bytes(get, spec.data);
  if (raw.byteLength !== spec.count * 2) throw new Error(`${spec.out}: ${raw.byteLength} bytes for ${spec.count} fp16 values`);
  const out = floats(raw, 'float16');
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/** externalData for a session opened from the plan's graph: every mount, then every weight made. */
export async function planExternalData(get: FileSource, plan: HeapPlanWire): Promise<ExternalDataEntry[]> {
  const entries: ExternalDataEntry[] = Object.entries(plan.mounts).map(([path, s]) => ({ path, data: slice(get, s) }));
  for (const spec of plan.materialize) {
    if (spec.kind === 'nbits_to_float32') entries.push({ path: spec.out, data: await nbitsToFloat32(get, spec) });
    else if (spec.kind === 'float16_to_float32') entries.push({ path: spec.out, data: await float16ToFloat32(get, spec) });
    else throw new Error(`heap plan: unknown weight kind ${JSON.stringify((spec as { kind: unknown }).kind)}`);
  }
  return entries;
}
