// The SM JPEG decoder's warp decoder, its synchronising passes: each lane's first start (a
// warm-up in its predecessor's chunk) and the decoding from a start to the lane's end, with the
// shortcut over repeating bytes. Needs jpeg_sm.h and jpeg_sm_warp.h first (the bit reader, the
// lanes' shared state, smj_ss_run); like them, compiled by NVRTC into the kernels
// (core/src/gpu/cuda/decode/sm.rs) and by the host C compiler for the tests (jpeg_sm_host.c).

#ifndef SLIDESTREAM_JPEG_SM_WARP_SYNC_H
#define SLIDESTREAM_JPEG_SM_WARP_SYNC_H

// Phase 3b (each lane but the first): a better first start. The lane decodes from a guessed state
// `warm` destuffed bytes before its chunk (inside its predecessor's) to the first symbol
// boundary at or past its chunk's start, and starts there. Huffman decoders that start apart
// fall into step within a few symbols, so this start is the true one unless the bytes before
// are ambiguous (long runs of identical blocks) or too few: the rounds then find and correct
// it as they would the plain guess. A warm-up that fails (a bad code) keeps the plain guess.
SMJ_FN void smj_ss_warm(const smj_u8* raw, int len, struct SmjSs* sh, int lane, const struct SmjTables* tabs, const struct SmjTile* t,
                        const struct SmjMcuMap* g, int mcu0, int total, int warm) {
    if (lane == 0 || warm <= 0 || sh->r[lane] >= sh->dend) {
        return;
    }
    // Back `warm` destuffed bytes from the chunk's start, not past the predecessor's start
    // (before the data's end every 0xFF is the first byte of a 0xFF00 pair).
    int q = sh->r[lane];
    long long at = sh->d[lane];
    while (at > sh->d[lane - 1] && sh->d[lane] - at < warm && q > sh->r[lane - 1]) {
        q -= 1;
        if (raw[q] == 0 && q - 1 >= sh->r[lane - 1] && raw[q - 1] == 0xFF) {
            q -= 1;
        }
        at -= 1;
    }
    if (at == sh->d[lane]) {
        return;
    }
    struct SmjState s;
    s.pos = at * 8;
    s.u = 0;
    s.z = 0;
    int nb = 0;
    int done = 0;
    smj_ss_run(raw, len, sh, q, at, &s, sh->d[lane] * 8, tabs, t, g, mcu0, total, 0, 0, &nb, 0, &done, &sh->work[lane]);
    if (s.pos >= 0) {
        sh->start[lane] = s;
    }
}

// Phase 4 (each lane but the last; rounds too): decode from the lane's start, to its end.
// Periodic shortcut: where the chunk's bytes repeat with period p (smj_ss_scan), the lane
// decodes one period from its start; if that ends on a symbol boundary exactly 8p bits on, in
// the start's state (block of the MCU modulo the tables' period, coefficient index), every
// later period decodes alike (the same bits in the same state), so the lane skips whole
// periods (counting their blocks) and decodes only the last stretch to its end. In a long run
// of identical blocks every lane's guess can stay in step with a wrong parse, so the true state
// crosses the run one lane per round; the shortcut makes those rounds a few periods long
// instead of a chunk.
SMJ_FN void smj_ss_sync(const smj_u8* raw, int len, struct SmjSs* sh, int lane, const struct SmjTables* tabs, const struct SmjTile* t,
                        const struct SmjMcuMap* g, int mcu0, int total) {
    struct SmjState s = sh->start[lane];
    long long stop = sh->d[lane + 1] * 8;
    int per = sh->per[lane];
    int nb = 0;
    int skipped = 0;
    int done = 0;
    if (per > 0 && s.pos >= sh->d[lane] * 8 && stop - s.pos > 3LL * 8 * per) {
        struct SmjState one = s;
        long long bits = 8LL * per;
        // The chunk holds no 0xFF (smj_ss_scan): destuffed bytes are raw bytes.
        int from = sh->r[lane] + (int)((s.pos >> 3) - sh->d[lane]);
        smj_ss_run(raw, len, sh, from, s.pos >> 3, &one, s.pos + bits, tabs, t, g, mcu0, total, 0, 0, &nb, 0, &done, &sh->work[lane]);
        // Along a path the block index advances by the blocks begun (one.u == (s.u + nb) % n),
        // so the state repeats when nb is a multiple of the tables' period.
        if (one.pos == s.pos + bits && one.z == s.z && nb % g->period == 0) {
            long long k = (stop - s.pos) / bits - 1;
            s.pos += k * bits;
            s.u = (int)((s.u + k * (long long)nb) % g->n);
            skipped = (int)(k * nb);
        }
    }
    if (s.pos >= 0) {
        long long byte = s.pos >> 3;
        int direct = per > 0 && byte >= sh->d[lane] && byte < sh->d[lane + 1];
        int from = direct ? sh->r[lane] + (int)(byte - sh->d[lane]) : sh->r[lane];
        long long from_d = direct ? byte : sh->d[lane];
        smj_ss_run(raw, len, sh, from, from_d, &s, stop, tabs, t, g, mcu0, total, 0, 0, &nb, 0, &done, &sh->work[lane]);
    }
    sh->end[lane] = s;
    sh->blocks[lane] = nb + skipped;
}

#endif
