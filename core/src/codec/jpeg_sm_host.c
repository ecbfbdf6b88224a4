// The SM JPEG decoder's functions (jpeg_sm.h) compiled for the host, so that the tests of
// core/src/codec/jpeg_sm.rs run the GPU's arithmetic against libjpeg-turbo without a GPU.
// Built by build.rs with -fwrapv: signed overflow wraps, as it does on the GPU.

#include <stddef.h>
#include "jpeg_sm.h"

int slidestream_smj_decode_segment(const uint8_t* data, int len, const struct SmjTables* tabs, const struct SmjTile* t, int mcu0, int mcus) {
    return smj_decode_segment(data, len, tabs, t, mcu0, mcus);
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
