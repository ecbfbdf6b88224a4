/*
 * JPEG decoding through libjpeg's own API, for what TurboJPEG does not do: (1) partial
 * decoding (below), (2) samples as coded, without colour conversion (slidestream_jpeg_decode_raw,
 * at the end).
 *
 * (1) Partial JPEG decoding through libjpeg's own API (the libjpeg-turbo that turbojpeg-sys
 * builds; these are the calls TurboJPEG's tj3Decompress8 makes for a cropping region), with
 * one difference: the rows below the part are skipped with jpeg_skip_scanlines up to the last
 * row, which entropy-decodes them without output, and the last row is read, so the decoder
 * reaches the end of the scan and jpeg_finish_decompress reads to EOI. TurboJPEG instead skips
 * straight to the bottom, which libjpeg-turbo implements by marking the input finished without
 * reading it (jdapistd.c, _jpeg_skip_scanlines), so a damaged tile's part returned pixels
 * where its whole decode fails. Warnings are errors (TurboJPEG's TJPARAM_STOPONWARNING).
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

struct ss_err {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char *msg;
  int msg_len;
};

static void ss_fail(j_common_ptr cinfo) {
  struct ss_err *e = (struct ss_err *)cinfo->err;
  char buf[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buf);
  snprintf(e->msg, (size_t)e->msg_len, "%s", buf);
  longjmp(e->jump, 1);
}

/* Warnings (msg_level < 0) stop the decode, as TurboJPEG's stop-on-warning does; trace
 * messages are ignored. */
static void ss_emit(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) ss_fail(cinfo);
}

static void ss_output(j_common_ptr cinfo) { (void)cinfo; }

/*
 * RGB-coded JPEG to RGBA. libjpeg-turbo converts RGB-coded streams (Adobe transform 0, as
 * Aperio's RGB tiles) with a plain per-pixel C loop (jdcolext.c, rgb_rgb_convert); this one
 * interleaves 16 pixels at a time with SSE2 and gives the same bytes (R, G, B, 255). Installed
 * as the colour deconverter's color_convert method after jpeg_start_decompress (ss_fast_rgb).
 */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The leading members of libjpeg-turbo's colour deconverter module (jpegint.h, struct
 * jpeg_color_deconverter), which jpeglib.h leaves opaque. */
struct ss_cconvert {
  void (*start_pass)(j_decompress_ptr cinfo);
  void (*color_convert)(j_decompress_ptr cinfo, JSAMPIMAGE input_buf, JDIMENSION input_row, JSAMPARRAY output_buf,
                        int num_rows);
};

static void ss_rgb_rgba(j_decompress_ptr cinfo, JSAMPIMAGE input_buf, JDIMENSION input_row, JSAMPARRAY output_buf,
                        int num_rows) {
  JDIMENSION n = cinfo->output_width;
  while (--num_rows >= 0) {
    const JSAMPLE *r = input_buf[0][input_row], *g = input_buf[1][input_row], *b = input_buf[2][input_row];
    JSAMPLE *o = *output_buf++;
    JDIMENSION c = 0;
    input_row++;
#if defined(__SSE2__)
    const __m128i ff = _mm_set1_epi8((char)-1);
    for (; c + 16 <= n; c += 16) {
      __m128i vr = _mm_loadu_si128((const __m128i *)(r + c));
      __m128i vg = _mm_loadu_si128((const __m128i *)(g + c));
      __m128i vb = _mm_loadu_si128((const __m128i *)(b + c));
      __m128i rg_lo = _mm_unpacklo_epi8(vr, vg), rg_hi = _mm_unpackhi_epi8(vr, vg);
      __m128i ba_lo = _mm_unpacklo_epi8(vb, ff), ba_hi = _mm_unpackhi_epi8(vb, ff);
      JSAMPLE *d = o + (size_t)c * 4;
      _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(rg_lo, ba_lo));
      _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(rg_lo, ba_lo));
      _mm_storeu_si128((__m128i *)(d + 32), _mm_unpacklo_epi16(rg_hi, ba_hi));
      _mm_storeu_si128((__m128i *)(d + 48), _mm_unpackhi_epi16(rg_hi, ba_hi));
    }
#endif
    for (; c < n; c++) {
      o[4 * c] = r[c];
      o[4 * c + 1] = g[c];
      o[4 * c + 2] = b[c];
      o[4 * c + 3] = 0xFF;
    }
  }
}

/* After jpeg_start_decompress: an 8-bit, 3-component RGB-coded stream decoded to RGBA gets
 * ss_rgb_rgba instead of libjpeg-turbo's C loop. Other streams (YCbCr has SIMD converters
 * already) are left alone. */
static void ss_fast_rgb(j_decompress_ptr d) {
  struct ss_cconvert *cc = (struct ss_cconvert *)(void *)d->cconvert;
  if (cc != NULL && cc->color_convert != NULL && d->jpeg_color_space == JCS_RGB && d->out_color_space == JCS_EXT_RGBA &&
      d->num_components == 3 && d->out_color_components == 4 && d->output_components == 4 && d->data_precision == 8 &&
      !d->quantize_colors && !d->raw_data_out)
    cc->color_convert = ss_rgb_rgba;
}

int slidestream_jpeg_decode_part_rows(const unsigned char *buf, unsigned long len, unsigned int crop_x,
                                      unsigned int crop_w, unsigned int y, unsigned int h, unsigned char *dst,
                                      size_t pitch, unsigned char *const *rows, size_t skip, size_t row_bytes,
                                      unsigned char *scratch, int read_to_end, long max_memory, char *msg,
                                      int msg_len);

/*
 * Decode rows [y, y + h) of the columns [crop_x, crop_x + crop_w) of a complete single-scan
 * JPEG stream to RGBA into dst (rows `pitch` bytes apart, crop_w * 4 bytes used), reading the
 * scan to its end. crop_x must be on an iMCU boundary (libjpeg may not move it).
 * `scratch` holds at least crop_w * 4 bytes (the discarded last row). Returns 0, or -1 with
 * libjpeg's message in msg.
 */
int slidestream_jpeg_decode_part(const unsigned char *buf, unsigned long len, unsigned int crop_x, unsigned int crop_w,
                                 unsigned int y, unsigned int h, unsigned char *dst, size_t pitch, unsigned char *scratch,
                                 long max_memory, char *msg, int msg_len) {
  return slidestream_jpeg_decode_part_rows(buf, len, crop_x, crop_w, y, h, dst, pitch, NULL, 0, 0, scratch, 1,
                                           max_memory, msg, msg_len);
}

/*
 * As slidestream_jpeg_decode_part for a stream already known to decode whole without error:
 * the decode stops after the part's last row, as TurboJPEG's cropping region does (same
 * pixels), with the SSE2 RGB-to-RGBA conversion (ss_fast_rgb) that TurboJPEG's path lacks.
 */
int slidestream_jpeg_decode_part_known_good(const unsigned char *buf, unsigned long len, unsigned int crop_x,
                                            unsigned int crop_w, unsigned int y, unsigned int h, unsigned char *dst,
                                            size_t pitch, unsigned char *scratch, long max_memory, char *msg,
                                            int msg_len) {
  return slidestream_jpeg_decode_part_rows(buf, len, crop_x, crop_w, y, h, dst, pitch, NULL, 0, 0, scratch, 0,
                                           max_memory, msg, msg_len);
}

/*
 * As slidestream_jpeg_decode_part, with each output row either written at dst + row * pitch
 * (rows == NULL) or decoded into scratch and bytes [skip, skip + row_bytes) of it copied to
 * rows[row] (h pointers, each to row_bytes writable bytes; skip + row_bytes <= crop_w * 4):
 * a stack of tiles decoded straight into each tile's own buffer, one hot row at a time.
 */
int slidestream_jpeg_decode_part_rows(const unsigned char *buf, unsigned long len, unsigned int crop_x,
                                      unsigned int crop_w, unsigned int y, unsigned int h, unsigned char *dst,
                                      size_t pitch, unsigned char *const *rows, size_t skip, size_t row_bytes,
                                      unsigned char *scratch, int read_to_end, long max_memory, char *msg,
                                      int msg_len) {
  struct jpeg_decompress_struct d;
  struct ss_err err;
  /* volatile: read after longjmp */
  volatile int created = 0;
  memset(&d, 0, sizeof(d));
  d.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = ss_fail;
  err.pub.emit_message = ss_emit;
  err.pub.output_message = ss_output;
  err.msg = msg;
  err.msg_len = msg_len;
  if (setjmp(err.jump)) {
    if (created) jpeg_destroy_decompress(&d);
    return -1;
  }
  jpeg_create_decompress(&d);
  created = 1;
  d.mem->max_memory_to_use = max_memory;
  jpeg_mem_src(&d, buf, len);
  jpeg_read_header(&d, TRUE);
  d.out_color_space = JCS_EXT_RGBA;
  d.do_fancy_upsampling = TRUE;
  d.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&d);
  if (y >= d.output_height || h == 0 || h > d.output_height - y || crop_w == 0 || crop_x >= d.output_width ||
      crop_w > d.output_width - crop_x) {
    snprintf(msg, (size_t)msg_len, "part %ux%u at (%u, %u) outside the %ux%u image", crop_w, h, crop_x, y,
             d.output_width, d.output_height);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  if (crop_x != 0 || crop_w != d.output_width) {
    JDIMENSION x = crop_x, w = crop_w;
    jpeg_crop_scanline(&d, &x, &w);
    if (x != crop_x || w != crop_w) {
      snprintf(msg, (size_t)msg_len, "libjpeg moved the crop %u+%u to %u+%u", crop_x, crop_w, (unsigned)x, (unsigned)w);
      jpeg_destroy_decompress(&d);
      return -1;
    }
  }
  ss_fast_rgb(&d);
  if (y > 0 && jpeg_skip_scanlines(&d, y) != y) {
    snprintf(msg, (size_t)msg_len, "could not skip %u rows", y);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  if (rows != NULL && skip + row_bytes > (size_t)crop_w * 4) {
    snprintf(msg, (size_t)msg_len, "row bytes %zu+%zu outside the %u-pixel crop", skip, row_bytes, crop_w);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  while (d.output_scanline < y + h) {
    JDIMENSION k = d.output_scanline - y;
    JSAMPROW row = rows != NULL ? scratch : dst + (size_t)k * pitch;
    if (jpeg_read_scanlines(&d, &row, 1) != 1) break;
    if (rows != NULL) memcpy(rows[k], scratch + skip, row_bytes);
  }
  if (d.output_scanline < y + h) {
    snprintf(msg, (size_t)msg_len, "decoding stopped at row %u of %u", (unsigned)d.output_scanline, (unsigned)d.output_height);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  if (!read_to_end) {
    /* Known-good stream: the rows below are not needed (jpeg_destroy_decompress aborts). */
    jpeg_destroy_decompress(&d);
    return 0;
  }
  /* Entropy-decode the rows below without output, stopping one row short of the bottom (a
   * skip to the bottom would not read them), then read the last row. */
  if (d.output_height - d.output_scanline > 1) {
    JDIMENSION n = d.output_height - d.output_scanline - 1;
    if (jpeg_skip_scanlines(&d, n) != n) {
      snprintf(msg, (size_t)msg_len, "could not skip %u rows", (unsigned)n);
      jpeg_destroy_decompress(&d);
      return -1;
    }
  }
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = scratch;
    if (jpeg_read_scanlines(&d, &row, 1) != 1) break;
  }
  if (d.output_scanline < d.output_height) {
    snprintf(msg, (size_t)msg_len, "decoding stopped at row %u of %u", (unsigned)d.output_scanline, (unsigned)d.output_height);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return 0;
}

/*
 * Decode a complete JPEG stream of `components` components to its samples as coded,
 * interleaved (`components` bytes per pixel, rows width * components bytes apart) into dst:
 * no colour conversion (jpeg_color_space and out_color_space JCS_UNKNOWN, whatever the
 * markers say), as libtiff's JPEG codec decodes tiles whose photometric is not YCbCr. Every
 * component must be sampled 1x1 (libtiff refuses other factors there). The image must be at
 * most max_w x max_h and fit in dst_len bytes; checked from the header before decoding.
 * Returns 0 with the size in *out_w, *out_h; -2 with the size there when it is too large; or
 * -1 with a message in msg.
 */
int slidestream_jpeg_decode_raw(const unsigned char *buf, unsigned long len, int components, unsigned int max_w,
                                unsigned int max_h, unsigned char *dst, size_t dst_len, unsigned int *out_w,
                                unsigned int *out_h, long max_memory, char *msg, int msg_len) {
  struct jpeg_decompress_struct d;
  struct ss_err err;
  volatile int created = 0;
  memset(&d, 0, sizeof(d));
  d.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = ss_fail;
  err.pub.emit_message = ss_emit;
  err.pub.output_message = ss_output;
  err.msg = msg;
  err.msg_len = msg_len;
  if (setjmp(err.jump)) {
    if (created) jpeg_destroy_decompress(&d);
    return -1;
  }
  jpeg_create_decompress(&d);
  created = 1;
  d.mem->max_memory_to_use = max_memory;
  jpeg_mem_src(&d, buf, len);
  jpeg_read_header(&d, TRUE);
  if (d.data_precision != 8) {
    snprintf(msg, (size_t)msg_len, "%d-bit JPEG (only 8-bit is read)", d.data_precision);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  if (d.num_components != components) {
    snprintf(msg, (size_t)msg_len, "JPEG stream has %d components, SamplesPerPixel is %d", d.num_components, components);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  for (int c = 0; c < d.num_components; c++) {
    if (d.comp_info[c].h_samp_factor != 1 || d.comp_info[c].v_samp_factor != 1) {
      snprintf(msg, (size_t)msg_len, "JPEG component %d is sampled %dx%d (only 1x1 is read without colour transform)", c,
               d.comp_info[c].h_samp_factor, d.comp_info[c].v_samp_factor);
      jpeg_destroy_decompress(&d);
      return -1;
    }
  }
  if (d.image_width > max_w || d.image_height > max_h ||
      (size_t)d.image_width * d.image_height * (size_t)components > dst_len) {
    /* Too large: the size for the caller's typed error. */
    *out_w = d.image_width;
    *out_h = d.image_height;
    jpeg_destroy_decompress(&d);
    return -2;
  }
  d.jpeg_color_space = JCS_UNKNOWN;
  d.out_color_space = JCS_UNKNOWN;
  d.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&d);
  size_t pitch = (size_t)d.output_width * (size_t)d.output_components;
  if (d.output_components != components) {
    snprintf(msg, (size_t)msg_len, "libjpeg gives %d components, %d expected", d.output_components, components);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = dst + (size_t)d.output_scanline * pitch;
    if (jpeg_read_scanlines(&d, &row, 1) != 1) break;
  }
  if (d.output_scanline < d.output_height) {
    snprintf(msg, (size_t)msg_len, "decoding stopped at row %u of %u", (unsigned)d.output_scanline, (unsigned)d.output_height);
    jpeg_destroy_decompress(&d);
    return -1;
  }
  *out_w = d.output_width;
  *out_h = d.output_height;
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return 0;
}
