// The SM JPEG decoder's functions (jpeg_sm.h) compiled for the host, so that the tests of
// core/src/codec/jpeg_sm.rs run the GPU's arithmetic against libjpeg-turbo without a GPU.
// Built by build.rs with -fwrapv: signed overflow wraps, as it does on the GPU.

#include <stddef.h>
#include "jpeg_sm.h"
#include "jpeg_sm_warp.h"
#include "jpeg_sm_warp_sync.h"

int slidestream_smj_decode_segment(const uint8_t* data, int len, const struct SmjTables* tabs, const struct SmjTile* t, int mcu0, int mcus) {
    return smj_decode_segment(data, len, tabs, t, mcu0, mcus);
}

// One segment decoded as the SM decoder's warp kernel (sm_huffman_warp) does, its lanes run one
// after another in each phase, with warm-ups of `warm` bytes (0: none) and the periodic shortcut
// if `periodic`; `*rounds` gets the rounds in which some lane decoded its chunk again (0: every
// first start was the true one), `*critical` the symbols along the warp's critical path (each
// phase costs its busiest lane's symbols), which the kernel's time for the segment follows.
int slidestream_smj_ss_decode_segment(const uint8_t* data, int len, const struct SmjTables* tabs, const struct SmjTile* t, int mcu0, int mcus, int warm,
                                      int periodic, int* rounds, long long* critical) {
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
        smj_ss_scan(data, len, &sh, l, periodic);
    }
    // The busiest lane of each phase, summed.
    long long path = 0;
    int seen[SMJ_LANES] = {0};
#define SMJ_PHASE_DONE()                                  \
    do {                                                  \
        int most = 0;                                     \
        for (int l = 0; l < SMJ_LANES; l++) {             \
            int w = sh.work[l] - seen[l];                 \
            most = w > most ? w : most;                   \
            seen[l] = sh.work[l];                         \
        }                                                 \
        path += most;                                     \
    } while (0)
    smj_ss_layout(len, &sh);
    for (int l = 0; l < SMJ_LANES - 1; l++) {
        smj_ss_warm(data, len, &sh, l, tabs, t, &g, mcu0, total, warm);
    }
    for (int l = 0; l < SMJ_LANES - 1; l++) {
        smj_ss_sync(data, len, &sh, l, tabs, t, &g, mcu0, total);
    }
    SMJ_PHASE_DONE();
    int redo = 0;
    for (int r = 1; r < SMJ_LANES; r++) {
        // Every lane reads its predecessor's end before any lane decodes (as the warp does).
        struct SmjState s[SMJ_LANES];
        for (int l = 1; l < SMJ_LANES - 1; l++) {
            s[l] = sh.end[l - 1];
        }
        int changed = 0;
        int decoded = 0;
        for (int l = 1; l < SMJ_LANES - 1; l++) {
            if (!smj_state_eq(s[l], sh.start[l], &g)) {
                decoded = 1;
                struct SmjState old = sh.end[l];
                sh.start[l] = s[l];
                smj_ss_sync(data, len, &sh, l, tabs, t, &g, mcu0, total);
                changed |= !smj_state_eq(old, sh.end[l], &g);
            }
        }
        redo += decoded;
        SMJ_PHASE_DONE();
        if (!changed) {
            break;
        }
    }
    *rounds = redo;
    sh.start[SMJ_LANES - 1] = sh.end[SMJ_LANES - 2];
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_zero(t, &g, mcu0, total, l);
    }
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_write(data, len, &sh, l, tabs, t, &g, mcu0, total);
    }
    SMJ_PHASE_DONE();
#undef SMJ_PHASE_DONE
    *critical = path;
    for (int l = 0; l < SMJ_LANES; l++) {
        smj_ss_dc(&sh, l, t, &g, mcu0, total);
    }
    return smj_ss_status(&sh);
}

void slidestream_smj_idct_islow(const short* coef, const uint16_t* q, uint8_t* out, int stride) {
    smj_idct_islow(coef, q, out, stride);
}

int slidestream_smj_block_in_window(const struct SmjTile* t, int c, int bx, int by, const int* win) {
    return smj_block_in_window(t, c, bx, by, win);
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
