// The SM JPEG decoder's functions (jpeg_sm.h) compiled for the host, so that the tests of
// core/src/codec/jpeg_sm.rs run the GPU's arithmetic against libjpeg-turbo without a GPU.
// Built by build.rs with -fwrapv: signed overflow wraps, as it does on the GPU.

#include <stddef.h>
#include "jpeg_sm.h"
#include "jpeg_sm_warp.h"

int slidestream_smj_decode_segment(const uint8_t* data, int len, const struct SmjTables* tabs, const struct SmjTile* t, int mcu0, int mcus) {
    return smj_decode_segment(data, len, tabs, t, mcu0, mcus);
}

// One segment decoded as the SM decoder's warp kernel (sm_huffman_ss) does, its lanes run one
// after another in each phase; `*rounds` gets the synchronisation rounds it took (1: the
// guessed starts all synchronised within their chunks).
int slidestream_smj_ss_decode_segment(const uint8_t* data, int len, const struct SmjTables* tabs, const struct SmjTile* t, int mcu0, int mcus, int* rounds) {
    if (mcu0 < 0 || mcus < 0 || mcu0 > t->mcux * t->mcuy - mcus) {
        return SMJ_BAD_SEGMENT;
    }
    struct SmjMcuMap g;
    smj_mcu_map(t, &g);
    int total = mcus * g.n;
    struct SmjSs sh;
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_bounds(data, len, &sh, l);
    }
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_scan(data, len, &sh, l);
    }
    smj_ss_layout(len, &sh);
    for (int l = 0; l < SMJ_LANES - 1; l++) {
        smj_ss_sync(data, len, &sh, l, tabs, t, &g, mcu0, total);
    }
    int r = 1;
    for (; r < SMJ_LANES; r++) {
        // Every lane reads its predecessor's end before any lane decodes (as the warp does).
        struct SmjState s[SMJ_LANES];
        for (int l = 1; l < SMJ_LANES - 1; l++) {
            s[l] = sh.end[l - 1];
        }
        int changed = 0;
        for (int l = 1; l < SMJ_LANES - 1; l++) {
            if (!smj_state_eq(s[l], sh.start[l], &g)) {
                struct SmjState old = sh.end[l];
                sh.start[l] = s[l];
                smj_ss_sync(data, len, &sh, l, tabs, t, &g, mcu0, total);
                changed |= !smj_state_eq(old, sh.end[l], &g);
            }
        }
        if (!changed) {
            break;
        }
    }
    *rounds = r;
    sh.start[SMJ_LANES - 1] = sh.end[SMJ_LANES - 2];
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_zero(t, &g, mcu0, total, l);
    }
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_write(data, len, &sh, l, tabs, t, &g, mcu0, total);
    }
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_dc(&sh, l, t, &g, mcu0, total);
    }
    return smj_ss_status(&sh);
}

void slidestream_smj_idct_islow(const short* coef, const uint16_t* q, uint8_t* out, int stride) {
    smj_idct_islow(coef, q, out, stride);
}

// Sizes and offsets of the descriptors, for the Rust side's layout test.
int slidestream_smj_layout(uint64_t* out, int n) {
    uint64_t v[] = {
        sizeof(struct SmjHuff),
        sizeof(struct SmjTables),
        sizeof(struct SmjTile),
        offsetof(struct SmjTile, tables),
        offsetof(struct SmjTile, h),
        offsetof(struct SmjTile, width),
        sizeof(struct SmjSegment),
        offsetof(struct SmjSegment, mcus),
    };
    int k = (int)(sizeof(v) / sizeof(v[0]));
    for (int i = 0; i < k && i < n; i++) {
        out[i] = v[i];
    }
    return k < n ? k : n;
}
