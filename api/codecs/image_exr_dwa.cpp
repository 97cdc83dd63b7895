// See image_exr_dwa.h: DWAA/DWAB chunks through OpenEXR's C++ library while its C core lacks them.
// Exceptions stop here; every failure becomes an hp_err.
#include "api/codecs/image_exr_dwa.h"

#include <ImfChannelList.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfIO.h>
#include <ImfInputPart.h>
#include <ImfMultiPartInputFile.h>
#include <ImfTiledInputPart.h>
#include <Iex.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

// OpenEXR 3.1's C++ DWA decoder can read memory it never wrote on a damaged file and return success:
// tests/fuzz/fuzz_exr found a tiled DWAA part whose pixels came out of buffers the library had just
// allocated with new[], so that the image carried whatever the heap held before, an earlier request's
// pixels among it. The replaceable global operator new (C++17 [new.delete]) is made zeroing here: such a
// file then decodes to the same pixels every time, from zeros. It holds for the whole process, so the other
// C++ that allocates through it (the Vulkan driver's LLVM in lavapipe, the validation layer, libstdc++) gets
// zeroed memory too, at the cost of a memset at allocation; under ASan its new/delete mismatch checks are
// then off (its overflow and use-after-free checks stay: calloc and free are still its own). What the
// library allocates with malloc or posix_memalign (its line buffers) is not covered: test_image checks the
// damaged tiled file, and the fuzz target checks every decoding twice.
void *operator new(std::size_t size)
{
    void *p = std::calloc(1, size ? size : 1);
    if (!p)
        throw std::bad_alloc();
    return p;
}
void *operator new[](std::size_t size) { return ::operator new(size); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept { return std::calloc(1, size ? size : 1); }
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept { return std::calloc(1, size ? size : 1); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }

namespace {

// The frame as the library's input stream: reads past the end throw, as a file's would.
class MemoryStream : public Imf::IStream {
  public:
    MemoryStream(const uint8_t *bytes, size_t len) : Imf::IStream("frame"), bytes_(bytes), len_(len) {}

    bool read(char c[], int n) override
    {
        if (n < 0 || pos_ > len_ || static_cast<uint64_t>(n) > len_ - pos_)
            throw IEX_NAMESPACE::InputExc("unexpected end of data");
        std::memcpy(c, bytes_ + pos_, static_cast<size_t>(n));
        pos_ += static_cast<uint64_t>(n);
        return pos_ < len_;
    }
    uint64_t tellg() override { return pos_; }
    void seekg(uint64_t pos) override { pos_ = pos; }

  private:
    const uint8_t *bytes_;
    uint64_t len_;
    uint64_t pos_ = 0;
};

Imf::PixelType pixel_type(int exr_type)
{
    switch (exr_type) {
    case 0: return Imf::UINT;
    case 1: return Imf::HALF;
    default: return Imf::FLOAT;
    }
}

} // namespace

struct hp_exr_dwa {
    MemoryStream stream;
    std::unique_ptr<Imf::MultiPartInputFile> file;
    std::unique_ptr<Imf::InputPart> scanlines;
    std::unique_ptr<Imf::TiledInputPart> tiles;

    hp_exr_dwa(const uint8_t *bytes, size_t len) : stream(bytes, len) {}
};

// The C++ library's header against the C core's: same data window, tiling and chosen channels.
static bool header_agrees(const Imf::Header &header, const hp_exr_dwa_expect *expect, char *why, size_t len)
{
    const IMATH_NAMESPACE::Box2i &dw = header.dataWindow();
    if (dw.min.x != expect->min_x || dw.min.y != expect->min_y || dw.max.x != expect->max_x ||
        dw.max.y != expect->max_y) {
        std::snprintf(why, len, "data window (%d,%d)-(%d,%d), the C core read (%d,%d)-(%d,%d)", dw.min.x, dw.min.y,
                      dw.max.x, dw.max.y, expect->min_x, expect->min_y, expect->max_x, expect->max_y);
        return false;
    }
    if (header.hasTileDescription() != (expect->tile_w > 0) ||
        (expect->tile_w > 0 && (header.tileDescription().xSize != expect->tile_w ||
                                header.tileDescription().ySize != expect->tile_h))) {
        std::snprintf(why, len, "the tile description differs");
        return false;
    }
    for (int i = 0; i < expect->slot_count; i++) {
        const Imf::Channel *ch = header.channels().findChannel(expect->slots[i].name);
        if (!ch || ch->type != pixel_type(expect->slots[i].type) || ch->xSampling != 1 || ch->ySampling != 1) {
            std::snprintf(why, len, "channel '%.64s' differs", expect->slots[i].name);
            return false;
        }
    }
    return true;
}

extern "C" hp_code hp_exr_dwa_open(const uint8_t *bytes, size_t len, int part, const hp_exr_dwa_expect *expect,
                                   hp_exr_dwa **out, hp_err *err)
{
    *out = nullptr;
    try {
        auto reader = std::make_unique<hp_exr_dwa>(bytes, len);
        // No threads of the library's own (callers spread chunks), no chunk-table reconstruction (as the
        // core path: a damaged offset table is an error).
        reader->file = std::make_unique<Imf::MultiPartInputFile>(reader->stream, 0, false);
        if (part < 0 || part >= reader->file->parts())
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR (DWA) has no part %d", part);
        char why[160];
        if (!header_agrees(reader->file->header(part), expect, why, sizeof(why)))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR (DWA) header is damaged: OpenEXR's C++ library reads %s",
                           why);
        if (expect->tile_w > 0)
            reader->tiles = std::make_unique<Imf::TiledInputPart>(*reader->file, part);
        else
            reader->scanlines = std::make_unique<Imf::InputPart>(*reader->file, part);
        *out = reader.release();
        return HP_OK;
    } catch (const std::bad_alloc &) {
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "EXR (DWA): out of memory opening the file");
    } catch (const std::exception &e) {
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR (DWA) header: %s", e.what());
    } catch (...) {
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR (DWA) header: unknown failure");
    }
}

extern "C" hp_code hp_exr_dwa_read(hp_exr_dwa *reader, const hp_exr_dwa_slot *slots, int slot_count,
                                   size_t pixel_stride, size_t line_stride, int tiled, int tile_x, int tile_y,
                                   int32_t x0, int32_t y0, int32_t w, int32_t h, hp_err *err)
{
    try {
        Imf::FrameBuffer fb;
        for (int i = 0; i < slot_count; i++)
            fb.insert(slots[i].name, Imf::Slice::Make(pixel_type(slots[i].type), slots[i].base,
                                                      IMATH_NAMESPACE::V2i(x0, y0), w, h, pixel_stride,
                                                      line_stride));
        if (tiled) {
            if (!reader->tiles)
                return hp_fail(err, HP_ERR_INTERNAL, "EXR (DWA): tile asked of a scanline part");
            reader->tiles->setFrameBuffer(fb);
            reader->tiles->readTile(tile_x, tile_y, 0);
        } else {
            if (!reader->scanlines)
                return hp_fail(err, HP_ERR_INTERNAL, "EXR (DWA): scanlines asked of a tiled part");
            reader->scanlines->setFrameBuffer(fb);
            reader->scanlines->readPixels(y0, y0 + h - 1);
        }
        return HP_OK;
    } catch (const std::bad_alloc &) {
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "EXR (DWA): out of memory decoding pixels (%d, %d)", x0, y0);
    } catch (const std::exception &e) {
        if (tiled)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR (DWA) tile (%d, %d) at pixel (%d, %d): %s", tile_x,
                           tile_y, x0, y0, e.what());
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR (DWA) scanlines %d-%d: %s", y0, y0 + h - 1, e.what());
    } catch (...) {
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR (DWA) pixels at (%d, %d): unknown failure", x0, y0);
    }
}

extern "C" void hp_exr_dwa_close(hp_exr_dwa **reader)
{
    if (!reader)
        return;
    delete *reader;
    *reader = nullptr;
}
