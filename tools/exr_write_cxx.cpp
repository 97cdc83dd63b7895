// Writes OpenEXR frames with OpenEXR's C++ library (tools/exr_write.h's hp_exr_write_cxx): the C core of
// OpenEXR 3.1 cannot compress DWAA/DWAB ("DWA/A compression not yet implemented in C"), which the tests'
// frames and make_frame's benchmark frames need. Built only with the decoder's own C++ fallback
// (api/codecs/image_exr_dwa.h), and gone with it.
#include "tools/exr_write.h"

#include <ImfChannelList.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfIO.h>
#include <ImfOutputFile.h>
#include <ImfStringAttribute.h>
#include <ImfStringVectorAttribute.h>
#include <ImfTiledOutputFile.h>
#include <Iex.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

namespace {

class MemoryOut : public Imf::OStream {
  public:
    MemoryOut() : Imf::OStream("memory") {}
    void write(const char c[], int n) override
    {
        if (pos_ + static_cast<uint64_t>(n) > data.size())
            data.resize(pos_ + static_cast<uint64_t>(n));
        std::memcpy(data.data() + pos_, c, static_cast<size_t>(n));
        pos_ += static_cast<uint64_t>(n);
    }
    uint64_t tellp() override { return pos_; }
    void seekp(uint64_t pos) override { pos_ = pos; }
    std::vector<char> data;

  private:
    uint64_t pos_ = 0;
};

Imf::PixelType pixel_type(int t) { return t == 0 ? Imf::UINT : t == 1 ? Imf::HALF : Imf::FLOAT; }
size_t type_size(int t) { return t == 1 ? 2 : 4; }

} // namespace

extern "C" int hp_exr_write_cxx(const hp_exr_spec *spec, uint8_t **out, size_t *len)
{
    return hp_exr_write_cxx_attr(spec, nullptr, nullptr, 0, out, len);
}

extern "C" int hp_exr_write_cxx_attr(const hp_exr_spec *spec, const char *name, const char *value, int as_vector,
                                     uint8_t **out, size_t *len)
{
    try {
        const int w = spec->width, h = spec->height;
        IMATH_NAMESPACE::Box2i data(IMATH_NAMESPACE::V2i(spec->data_x, spec->data_y),
                                    IMATH_NAMESPACE::V2i(spec->data_x + w - 1, spec->data_y + h - 1));
        IMATH_NAMESPACE::Box2i display(IMATH_NAMESPACE::V2i(0, 0),
                                       IMATH_NAMESPACE::V2i(spec->display_w - 1, spec->display_h - 1));
        Imf::Header header(display, data);
        header.compression() = static_cast<Imf::Compression>(spec->compression);
        if (name && as_vector)
            header.insert(name, Imf::StringVectorAttribute(Imf::StringVector(1, value)));
        else if (name)
            header.insert(name, Imf::StringAttribute(value));
        Imf::FrameBuffer fb;
        for (int c = 0; c < spec->channel_count; c++) {
            const hp_exr_channel &ch = spec->channels[c];
            header.channels().insert(ch.name, Imf::Channel(pixel_type(ch.type)));
            fb.insert(ch.name, Imf::Slice::Make(pixel_type(ch.type), ch.data, data, type_size(ch.type),
                                                type_size(ch.type) * static_cast<size_t>(w)));
        }
        MemoryOut stream;
        if (spec->tile > 0) {
            header.setTileDescription(Imf::TileDescription(spec->tile, spec->tile, Imf::ONE_LEVEL));
            Imf::TiledOutputFile file(stream, header);
            file.setFrameBuffer(fb);
            file.writeTiles(0, file.numXTiles() - 1, 0, file.numYTiles() - 1);
        } else {
            Imf::OutputFile file(stream, header);
            file.setFrameBuffer(fb);
            file.writePixels(h);
        }
        *len = stream.data.size();
        *out = static_cast<uint8_t *>(std::malloc(*len));
        if (!*out)
            return 0;
        std::memcpy(*out, stream.data.data(), *len);
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "hp_exr_write_cxx: %s\n", e.what());
        return 0;
    }
}
