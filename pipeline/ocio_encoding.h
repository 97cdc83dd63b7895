/* What a display/view of a studio's OCIO config writes, measured (issue 34; docs/COLOR.md): its primaries and
 * transfer as ITU-T H.273 numbers them, which PNG's cICP and AVIF's CICP carry. OCIO names a display colour
 * space but does not say what it encodes; a file must, or a viewer shows PQ code values as SDR. So the config's
 * own conversion from display-referred CIE XYZ (its cie_xyz_d65_interchange role) to the view's display colour
 * space is run on greys and on each candidate's primaries, and what comes out is held to the formulas:
 *   transfer  sRGB (IEC 61966-2-1), a pure 2.4 power (BT.1886's EOTF; H.273 calls SDR video's BT.709 [1]), a pure
 *             2.2 power [4], ST 2084 PQ with Y 1 = 100 cd/m2 [16], HLG (BT.2100, a 1000 cd/m2 display) [18];
 *   primaries BT.709 [1], Display P3 (SMPTE EG 432-1, D65) [12], BT.2020 [9].
 * A config without that role (Blender's), or a display that matches none, is "unknown": the answer is tagged
 * sRGB, and says the tag is assumed. */
#ifndef HP_OCIO_ENCODING_H
#define HP_OCIO_ENCODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ocio/config.h"

typedef struct hp_ocio_encoding {
    bool known;
    uint8_t primaries; /* H.273 ColourPrimaries: 1, 12 or 9 */
    uint8_t transfer;  /* H.273 TransferCharacteristics: 13, 1, 4, 16 or 18 */
} hp_ocio_encoding;

hp_ocio_encoding hp_ocio_encoding_of(const hp_ocio_config *config, const char *display, const char *view);
/* PQ or HLG. */
bool hp_ocio_encoding_hdr(const hp_ocio_encoding *e);
/* "BT.2020 primaries, PQ (ST 2084) transfer", for the start-up log; buf returned. */
const char *hp_ocio_encoding_describe(const hp_ocio_encoding *e, char *buf, size_t size);

#endif
