// slidestream GPU kernels, compiled at run time with NVRTC (core/src/gpu/cuda/kernels/mod.rs).
//
// convert:  planar JPEG components as nvJPEG decodes them (NVJPEG_OUTPUT_UNCHANGED) -> RGBA tile,
//           reproducing libjpeg-turbo: "fancy" (triangular) chroma upsampling of jdsample.c and
//           the fixed-point YCbCr->RGB of jdcolor.c (see core/src/gpu/color.rs, the CPU
//           reference these formulas are tested against).
// assemble: RGBA tiles -> patches (n, height, width, channels) with OpenSlide's semantics.
// splice:   device bitstreams (cuFile path): [SOI + JPEGTables body] + tile bytes after its SOI.
// sof_scan: device bitstreams: SOF geometry of each tile, for host-side validation.
// resize_h / resize_v: one axis of the Lanczos-3 resize of RGB patches with integer taps made
//           on the host (core/src/slide/resize_taps.rs, whose CPU reference equals the CPU
//           path's resize exactly).

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned char u8;

struct ConvDesc {
    u64 planes[3];
    int pitch[3];
    int pw[3];
    int ph[3];
    int sub_h;
    int sub_v;
    int kind;  // 0: components are R,G,B; 1: Y,Cb,Cr
    int w;     // pixels written across and down: the tile's valid size, or the part's
    int h;
    int x0;    // tile pixel of the output's top-left (0, 0 for a whole tile; a part's corner for
    int y0;    // the SM decoder's region-aware decode)
    u64 out;   // RGBA, pitch w * 4
};

struct TileRef {
    u64 ptr;   // RGBA of pixel (x0, y0), rows pitch * 4 bytes apart; 0 = no tile (missing or failed)
    i64 x0;    // level pixel of the decoded part's top-left (the tile's for a whole tile)
    i64 y0;
    int w;     // pixels of the decoded part (a partial tile covers only what its batch needs)
    int h;
    int pitch; // row pitch in pixels (>= w)
    int pad;
};

struct PatchDesc {
    i64 rx;    // level pixel of the patch's top-left
    i64 ry;
    i64 col0;  // first tile column / row of the patch's tile grid
    i64 row0;
    int gcols;
    int grows;
    int grid;  // offset of the patch's grid in the grid array (tile indices, -1 = none)
    int tile_w; // tile size of the patch's image (one call mixes images of several slides)
    int tile_h;
    int pad;
};

struct SpliceDesc {
    u64 src;   // tile bytes (starting with SOI)
    u64 dst;   // spliced stream
    int len;   // tile length in bytes
    int pad;
};

// Layouts shared with core/src/gpu/cuda/kernels/mod.rs, which asserts the same numbers. Sizes
// are checked by every compiler; field offsets where `__builtin_offsetof` is a constant
// expression: NVRTC from 13.4 on (earlier NVRTC lacks it) and host compilers (g++, clang, nvcc).
static_assert(sizeof(ConvDesc) == 96, "ConvDesc layout differs from kernels/mod.rs");
static_assert(sizeof(TileRef) == 40, "TileRef layout differs from kernels/mod.rs");
static_assert(sizeof(PatchDesc) == 56, "PatchDesc layout differs from kernels/mod.rs");
static_assert(sizeof(SpliceDesc) == 24, "SpliceDesc layout differs from kernels/mod.rs");
#if !defined(__CUDACC_RTC__) || __CUDACC_VER_MAJOR__ > 13 || (__CUDACC_VER_MAJOR__ == 13 && __CUDACC_VER_MINOR__ >= 4)
#define OFF(T, f) __builtin_offsetof(T, f)
static_assert(__builtin_offsetof(ConvDesc, planes) == 0 && OFF(ConvDesc, pitch) == 24 && OFF(ConvDesc, pw) == 36 && OFF(ConvDesc, ph) == 48 && OFF(ConvDesc, sub_h) == 60 && OFF(ConvDesc, sub_v) == 64 && OFF(ConvDesc, kind) == 68 && OFF(ConvDesc, w) == 72 && OFF(ConvDesc, h) == 76 && OFF(ConvDesc, x0) == 80 && OFF(ConvDesc, y0) == 84 && OFF(ConvDesc, out) == 88, "ConvDesc field offsets");
static_assert(__builtin_offsetof(TileRef, ptr) == 0 && OFF(TileRef, x0) == 8 && OFF(TileRef, y0) == 16 && OFF(TileRef, w) == 24 && OFF(TileRef, h) == 28 && OFF(TileRef, pitch) == 32 && OFF(TileRef, pad) == 36, "TileRef field offsets");
static_assert(__builtin_offsetof(PatchDesc, rx) == 0 && OFF(PatchDesc, ry) == 8 && OFF(PatchDesc, col0) == 16 && OFF(PatchDesc, row0) == 24 && OFF(PatchDesc, gcols) == 32 && OFF(PatchDesc, grows) == 36 && OFF(PatchDesc, grid) == 40 && OFF(PatchDesc, tile_w) == 44 && OFF(PatchDesc, tile_h) == 48 && OFF(PatchDesc, pad) == 52, "PatchDesc field offsets");
static_assert(__builtin_offsetof(SpliceDesc, src) == 0 && OFF(SpliceDesc, dst) == 8 && OFF(SpliceDesc, len) == 16 && OFF(SpliceDesc, pad) == 20, "SpliceDesc field offsets");
#undef OFF
#endif

__device__ __forceinline__ u8 clamp255(int v) { return (u8)(v < 0 ? 0 : (v > 255 ? 255 : v)); }

// Upsampled chroma at full-resolution pixel (x, y): libjpeg-turbo jdsample.c h2v1 / h1v2 / h2v2
// fancy upsampling as a per-pixel gather (edge samples replicated, as jdmainct.c provides the
// context rows); exact per core/src/gpu/color.rs's tests against libjpeg-turbo 3.1.
__device__ __forceinline__ int chroma_at(const u8* p, int pitch, int pw, int ph, int sh, int sv, int x, int y) {
    int cx = x / sh, cy = y / sv;
    if (cx > pw - 1) cx = pw - 1;
    if (cy > ph - 1) cy = ph - 1;
    if (sh == 1 && sv == 1) return p[cy * pitch + cx];
    // jinit_upsampler takes the fancy path for h2 only when downsampled_width > 2; else a box.
    if (sh == 2 && pw <= 2) return p[cy * pitch + cx];
    if (sv == 1) {  // h2v1
        int nx = (x & 1) ? min(cx + 1, pw - 1) : max(cx - 1, 0);
        int t = 3 * p[cy * pitch + cx] + p[cy * pitch + nx];
        return (x & 1) ? (t + 2) >> 2 : (t + 1) >> 2;
    }
    int ny = (y & 1) ? min(cy + 1, ph - 1) : max(cy - 1, 0);
    if (sh == 1) {  // h1v2
        int t = 3 * p[cy * pitch + cx] + p[ny * pitch + cx];
        return (y & 1) ? (t + 2) >> 2 : (t + 1) >> 2;
    }
    // h2v2
    int nx = (x & 1) ? min(cx + 1, pw - 1) : max(cx - 1, 0);
    int t = 3 * p[cy * pitch + cx] + p[ny * pitch + cx];
    int n = 3 * p[cy * pitch + nx] + p[ny * pitch + nx];
    return (x & 1) ? (3 * t + n + 7) >> 4 : (3 * t + n + 8) >> 4;
}

extern "C" __global__ void convert(const ConvDesc* descs) {
    const ConvDesc d = descs[blockIdx.z];
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= d.w || oy >= d.h) return;
    int x = d.x0 + ox, y = d.y0 + oy;
    const u8* p0 = (const u8*)d.planes[0];
    const u8* p1 = (const u8*)d.planes[1];
    const u8* p2 = (const u8*)d.planes[2];
    int c0 = p0[y * d.pitch[0] + x];
    int sh = d.sub_h, sv = d.sub_v;
    int c1 = chroma_at(p1, d.pitch[1], d.pw[1], d.ph[1], sh, sv, x, y);
    int c2 = chroma_at(p2, d.pitch[2], d.pw[2], d.ph[2], sh, sv, x, y);
    u8 r, g, b;
    if (d.kind == 0) {
        r = (u8)c0; g = (u8)c1; b = (u8)c2;
    } else {
        // jdcolor.c build_ycc_rgb_table: FIX(1.40200) = 91881, FIX(1.77200) = 116130,
        // FIX(0.71414) = 46802, FIX(0.34414) = 22554, ONE_HALF = 1 << 15, SCALEBITS = 16.
        int cb = c1 - 128, cr = c2 - 128;
        r = clamp255(c0 + ((91881 * cr + 32768) >> 16));
        g = clamp255(c0 + ((-22554 * cb - 46802 * cr + 32768) >> 16));
        b = clamp255(c0 + ((116130 * cb + 32768) >> 16));
    }
    uchar4 v = make_uchar4(r, g, b, 255);
    ((uchar4*)d.out)[(i64)oy * d.w + ox] = v;
}

extern "C" __global__ void assemble(const TileRef* tiles, const int* grids, const PatchDesc* patches, int patch0,
                                    int out_w, int out_h, int channels,
                                    int bg_r, int bg_g, int bg_b, u8* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = patch0 + blockIdx.z;
    if (x >= out_w || y >= out_h) return;
    const PatchDesc pd = patches[z];
    i64 lx = pd.rx + x, ly = pd.ry + y;
    int r = 0, g = 0, b = 0, a = 0;
    if (lx >= 0 && ly >= 0) {
        i64 gc = lx / pd.tile_w - pd.col0, gr = ly / pd.tile_h - pd.row0;
        if (gc >= 0 && gr >= 0 && gc < pd.gcols && gr < pd.grows) {
            int idx = grids[pd.grid + gr * pd.gcols + gc];
            if (idx >= 0) {
                const TileRef t = tiles[idx];
                i64 ix = lx - t.x0, iy = ly - t.y0;
                if (t.ptr && ix >= 0 && iy >= 0 && ix < t.w && iy < t.h) {
                    uchar4 v = ((const uchar4*)t.ptr)[iy * t.pitch + ix];
                    r = v.x; g = v.y; b = v.z; a = v.w;
                }
            }
        }
    }
    i64 pix = ((i64)z * out_h + y) * out_w + x;
    if (channels == 4) {
        ((uchar4*)out)[pix] = make_uchar4((u8)r, (u8)g, (u8)b, (u8)a);
    } else {
        if (a == 0) { r = bg_r; g = bg_g; b = bg_b; }
        else if (a != 255) {
            r = (r * a + bg_r * (255 - a) + 127) / 255;
            g = (g * a + bg_g * (255 - a) + 127) / 255;
            b = (b * a + bg_b * (255 - a) + 127) / 255;
        }
        u8* o = out + pix * 3;
        o[0] = (u8)r; o[1] = (u8)g; o[2] = (u8)b;
    }
}

extern "C" __global__ void splice(const SpliceDesc* descs, const u8* prefix, int prefix_len) {
    const SpliceDesc d = descs[blockIdx.x];
    u8* dst = (u8*)d.dst;
    const u8* src = (const u8*)d.src;
    for (int i = threadIdx.x; i < prefix_len; i += blockDim.x) dst[i] = prefix[i];
    for (int i = 2 + threadIdx.x; i < d.len; i += blockDim.x) dst[prefix_len + i - 2] = src[i];
}

// info[k * 8 + ...]: 0 status (1 = baseline/extended Huffman SOF found, 2 = other SOF, 3 = no
// SOI, 4 = malformed / no SOF), 1 height, 2 width, 3 components, 4..6 (H << 4 | V) of components
// 0..2.
extern "C" __global__ void sof_scan(const SpliceDesc* descs, int n, int* info) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const SpliceDesc d = descs[k];
    const u8* s = (const u8*)d.src;
    int* o = info + k * 8;
    for (int i = 0; i < 8; i++) o[i] = 0;
    if (d.len < 4 || s[0] != 0xFF || s[1] != 0xD8) { o[0] = 3; return; }
    int p = 2;
    for (int guard = 0; guard < 256; guard++) {
        while (p + 1 < d.len && s[p] == 0xFF && s[p + 1] == 0xFF) p++;
        if (p + 4 > d.len || s[p] != 0xFF) { o[0] = 4; return; }
        int m = s[p + 1];
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { p += 2; continue; }
        if (m == 0xDA || m == 0xD9) { o[0] = 4; return; }
        int len = (s[p + 2] << 8) | s[p + 3];
        if (len < 2 || p + 2 + len > d.len) { o[0] = 4; return; }
        bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
        if (sof) {
            if (len < 8) { o[0] = 4; return; }
            int nf = s[p + 9];
            o[0] = (m == 0xC0 || m == 0xC1) && s[p + 4] == 8 ? 1 : 2;
            o[1] = (s[p + 5] << 8) | s[p + 6];
            o[2] = (s[p + 7] << 8) | s[p + 8];
            o[3] = nf;
            for (int c = 0; c < nf && c < 3; c++) {
                if (10 + 3 * c + 1 >= 2 + len) { o[0] = 4; return; }
                o[4 + c] = s[p + 10 + 3 * c + 1];
            }
            return;
        }
        p += 2 + len;
    }
    o[0] = 4;
}

// One RGB sample of an axis resize: clamp((2^(prec-1) + sum in[k] * tap[k]) >> prec, 0, 255),
// int32 as the CPU path (resize_taps.rs `sample`).
__device__ __forceinline__ u8 resize_tap_sum(const u8* in, i64 stride, const short* taps, int n, int prec) {
    int acc = 1 << (prec - 1);
    for (int k = 0; k < n; k++) acc += (int)in[(i64)k * stride] * (int)taps[k];
    acc >>= prec;
    return (u8)(acc < 0 ? 0 : (acc > 255 ? 255 : acc));
}

// Horizontal pass: src (n, h, in_w, 3) -> dst (n, h, out_w, 3); grid (x over out_w * 3
// samples, y over h, z over patches).
extern "C" __global__ void resize_h(const u8* src, u8* dst, int in_w, int h, int out_w,
                                    const int* starts, const int* sizes, const short* taps, int window, int prec) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;  // sample in the output row
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (s >= out_w * 3 || y >= h) return;
    int o = s / 3, c = s - o * 3;
    i64 row = (i64)blockIdx.z * h + y;
    const u8* in = src + (row * in_w + starts[o]) * 3 + c;
    dst[row * out_w * 3 + s] = resize_tap_sum(in, 3, taps + (i64)o * window, sizes[o], prec);
}

// Vertical pass: src (n, in_h, w, 3) -> patch rows[z] of dst (?, out_h, w, 3) (rows: the
// output index of each patch of src); grid (x over w * 3 samples, y over out_h, z over patches).
extern "C" __global__ void resize_v(const u8* src, u8* dst, const long long* rows, int in_h, int w, int out_h,
                                    const int* starts, const int* sizes, const short* taps, int window, int prec) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    int o = blockIdx.y * blockDim.y + threadIdx.y;
    if (s >= w * 3 || o >= out_h) return;
    i64 z = blockIdx.z;
    const u8* in = src + ((z * in_h + starts[o]) * w) * 3 + s;
    dst[((rows[z] * out_h + o) * w) * 3 + s] = resize_tap_sum(in, (i64)w * 3, taps + (i64)o * window, sizes[o], prec);
}
