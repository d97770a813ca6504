#!/usr/bin/env python3
"""Regenerates tests/fixtures/media/: tiny images in every format loom::media decodes, and the
pixels transformers would see for each (PIL.ImageOps.exif_transpose + .convert("RGB"), exactly what
transformers.image_utils.load_image does), stored as binary PPM (P6) next to each input:
    <name>.<ext>       the encoded image
    <name>.ppm         expected RGB8 pixels after EXIF orientation
Deterministic: fixed patterns, no randomness. Run from the repo root:
    python3 tools/reference/make_media_fixtures.py
"""
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image, ImageOps, PngImagePlugin

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "media")
W, H = 13, 7


def pattern_rgba(w=W, h=H):
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 19 + y * 7) % 256
    g = (y * 37 + x * 3 + 11) % 256
    b = ((x ^ y) * 23 + 5) % 256
    a = (x * 21 + y * 40) % 256  # includes 0 (fully transparent) at (0,0)
    return np.stack([r, g, b, a], -1).astype(np.uint8)


def write_ppm(path, im):
    arr = np.asarray(im)
    assert arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] == 3
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (arr.shape[1], arr.shape[0]))
        f.write(arr.tobytes())


def reference(data):
    im = Image.open(io.BytesIO(data))
    im = ImageOps.exif_transpose(im)
    return im.convert("RGB")


def emit(name, ext, data):
    with open(os.path.join(OUT, f"{name}.{ext}"), "wb") as f:
        f.write(data)
    write_ppm(os.path.join(OUT, f"{name}.ppm"), reference(data))


def save(im, fmt, **kw):
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def png_chunk(tag, body):
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)


def adam7_png(rgb):
    """Pillow cannot write interlaced PNGs: a minimal Adam7 RGB8 writer (filter type 0)."""
    h, w, _ = rgb.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = rgb[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        for row in sub:
            raw += b"\x00" + row.tobytes()
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


def bmp_file(w, h, bpp, pixels, compression=0, palette=b"", header=40, masks=()):
    """Hand-made BMP (Pillow writes neither RLE nor 16-bit): info header (+ masks) + palette + pixels."""
    extra = b"".join(struct.pack("<I", m) for m in masks)
    if header == 40:
        info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, bpp, compression, len(pixels), 2835, 2835,
                           len(palette) // 4, 0) + extra
    else:  # V4/V5-style: masks inside the header
        info = struct.pack("<IiiHHIIiiII", header, w, h, 1, bpp, compression, len(pixels), 2835, 2835,
                           len(palette) // 4, 0) + extra
        info += b"\0" * (header - len(info))
    off = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", off + len(pixels), 0, 0, off) + info + palette + pixels


def rle_encode(idx, rle4):
    """RLE8/RLE4 stream (bottom-up) using every opcode Pillow handles: encoded runs, absolute runs,
    delta, end of line, end of bitmap. Pixels skipped by the delta become index 0."""
    h, w = idx.shape
    out = bytearray()
    for r, row in enumerate(idx[::-1]):
        row = [int(v) for v in row]
        x = 0
        if r == 2:  # skip 2 pixels with a delta
            out += bytes([0, 2, 2, 0])
            x = 2
        if r % 2 == 0:  # absolute run of 5 literal pixels
            lit = row[x:x + 5]
            out += bytes([0, len(lit)])
            if rle4:
                lit2 = lit + [0]
                body = bytes((lit2[i] << 4) | lit2[i + 1] for i in range(0, len(lit), 2))
            else:
                body = bytes(lit)
            out += body + (b"\0" if len(body) % 2 else b"")
            x += len(lit)
        while x < w:  # encoded runs: equal pixels (RLE8) or two alternating pixels (RLE4)
            n = 1
            if rle4:
                a, b = row[x], row[x + 1] if x + 1 < w else 0
                n = 2 if x + 1 < w else 1
                while x + n < w and row[x + n] == (a if n % 2 == 0 else b):
                    n += 1
                out += bytes([n, (a << 4) | b])
            else:
                while x + n < w and row[x + n] == row[x]:
                    n += 1
                out += bytes([n, row[x]])
            x += n
        out += bytes([0, 0])
    out += bytes([0, 1])
    return bytes(out)


def raw_png(arr, depth, color_type, chunks=()):
    """Non-interlaced PNG of big-endian samples arr[h][w][c] (filter type 0), for modes Pillow cannot write."""
    h, w = arr.shape[:2]
    raw = b"".join(b"\x00" + row.tobytes() for row in arr)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0)
    body = png_chunk(b"IHDR", ihdr) + b"".join(png_chunk(t, c) for t, c in chunks)
    return b"\x89PNG\r\n\x1a\n" + body + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


def exif_big_endian(o):
    """Motorola-order ("MM") TIFF with one IFD0 entry, Orientation = o (Pillow writes "II")."""
    return b"Exif\0\0MM\0\x2a" + struct.pack(">IHHHIHH", 8, 1, 0x0112, 3, 1, o, 0) + struct.pack(">I", 0)


def exif_with_orientation(o):
    ex = Image.Exif()
    ex[0x0112] = o
    return ex.tobytes()


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    rgba = pattern_rgba()
    im_rgba = Image.fromarray(rgba, "RGBA")
    im_rgb = im_rgba.convert("RGB")
    im_l = im_rgb.convert("L")
    im_la = Image.merge("LA", (im_l, im_rgba.getchannel("A")))
    im_p = im_rgb.quantize(colors=16, dither=Image.Dither.NONE)

    # PNG
    emit("png_rgb", "png", save(im_rgb, "PNG"))
    emit("png_rgba", "png", save(im_rgba, "PNG"))
    emit("png_gray", "png", save(im_l, "PNG"))
    emit("png_gray_alpha", "png", save(im_la, "PNG"))
    emit("png_palette", "png", save(im_p, "PNG"))
    emit("png_palette_trns", "png", save(im_p, "PNG", transparency=3))
    emit("png_gray1", "png", save(im_l.point(lambda v: 255 if v > 100 else 0).convert("1"), "PNG"))
    g16 = (np.arange(W * H, dtype=np.uint32).reshape(H, W) * 977 % 65536).astype(np.uint16)
    g16[0, :4] = [0, 1, 255, 256]  # Pillow's I;16 -> RGB clips at 255 (it does not scale)
    emit("png_gray16", "png", save(Image.fromarray(g16), "PNG"))
    rgba16 = (rgba.astype(np.uint16) * 257 + np.arange(W)[None, :, None] * 3).astype(">u2")
    emit("png_rgb16", "png", raw_png(rgba16[..., :3], 16, 2))
    emit("png_rgba16", "png", raw_png(rgba16, 16, 6))
    emit("png_gray_alpha16", "png", raw_png(rgba16[..., [0, 3]], 16, 4))
    # 16-bit gray with a tRNS chunk (Pillow ignores it on convert("RGB")).
    emit("png_gray16_trns", "png", raw_png(g16.astype(">u2")[..., None], 16, 0, [(b"tRNS", struct.pack(">H", 977))]))
    emit("png_palette4", "png", save(im_p, "PNG", bits=4))
    emit("png_interlaced", "png", adam7_png(rgba[..., :3]))
    emit("jpeg_exif_be8", "jpg", save(im_rgb, "JPEG", quality=90, exif=exif_big_endian(8)))
    # Orientation from XMP (Pillow's fallback when EXIF has no Orientation tag), and EXIF winning over XMP.
    xmp6 = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description tiff:Orientation="6"/></x:xmpmeta>'
    xmp3 = b"<x:xmpmeta><tiff:Orientation>3</tiff:Orientation></x:xmpmeta>"
    emit("jpeg_xmp6", "jpg", save(im_rgb, "JPEG", quality=90, xmp=xmp6))
    emit("jpeg_exif1_xmp6", "jpg", save(im_rgb, "JPEG", quality=90, xmp=xmp6, exif=exif_with_orientation(1)))
    emit("webp_xmp6", "webp", save(im_rgb, "WEBP", lossless=True, xmp=xmp6))
    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", xmp3.decode())
    emit("png_xmp3", "png", save(im_rgb, "PNG", pnginfo=info))
    raw = exif_with_orientation(8)  # ImageMagick's hex text form of the APP1 payload
    hexs = raw.hex()
    info = PngImagePlugin.PngInfo()
    info.add_text("Raw profile type exif", "\nexif\n%8d\n" % len(raw) + "\n".join(hexs[i:i + 72] for i in range(0, len(hexs), 72)), zip=True)
    emit("png_raw_profile8", "png", save(im_rgb, "PNG", pnginfo=info))
    emit("png_exif6", "png", save(im_rgb, "PNG", exif=exif_with_orientation(6)))

    # JPEG (libjpeg-turbo on both sides)
    emit("jpeg_420", "jpg", save(im_rgb, "JPEG", quality=90))
    emit("jpeg_444", "jpg", save(im_rgb, "JPEG", quality=95, subsampling=0))
    emit("jpeg_progressive", "jpg", save(im_rgb, "JPEG", quality=85, progressive=True))
    emit("jpeg_gray", "jpg", save(im_l, "JPEG", quality=90))
    emit("jpeg_cmyk", "jpg", save(im_rgb.convert("CMYK"), "JPEG", quality=90))
    for o in range(1, 9):
        emit(f"jpeg_exif{o}", "jpg", save(im_rgb, "JPEG", quality=90, exif=exif_with_orientation(o)))

    # WebP (libwebp on both sides)
    emit("webp_lossless", "webp", save(im_rgba, "WEBP", lossless=True))
    emit("webp_lossy", "webp", save(im_rgb, "WEBP", quality=80))
    emit("webp_lossy_alpha", "webp", save(im_rgba, "WEBP", quality=80))
    emit("webp_exif3", "webp", save(im_rgb, "WEBP", lossless=True, exif=exif_with_orientation(3)))

    # GIF
    emit("gif_static", "gif", save(im_p, "GIF"))
    frame2 = Image.fromarray(255 - np.asarray(im_rgb)).quantize(colors=8)
    emit("gif_animated", "gif", save(im_p, "GIF", save_all=True, append_images=[frame2], duration=50, loop=0))
    emit("gif_transparent", "gif", save(im_p, "GIF", transparency=2))

    # Interlaced GIF: Pillow interlaces only when both sides are >= 16.
    big = Image.fromarray(pattern_rgba(20, 17)[..., :3]).quantize(colors=32, dither=Image.Dither.NONE)
    emit("gif_interlaced", "gif", save(big, "GIF", interlace=True))
    # First frame smaller than the logical screen (Pillow never writes one): an 8x4 frame re-wrapped at
    # (3, 2) on a 13x7 screen, with and without a transparent index (the canvas fill differs).
    small = Image.fromarray(pattern_rgba(8, 4)[..., :3]).quantize(colors=8, dither=Image.Dither.NONE)
    for name, kw in (("gif_offset", {}), ("gif_offset_trns", {"transparency": 5})):
        g = bytearray(save(small, "GIF", **kw))
        struct.pack_into("<HH", g, 6, W, H)
        gct = 3 << ((g[10] & 7) + 1) if g[10] & 0x80 else 0
        i = 13 + gct
        while g[i] == 0x21:  # skip extensions
            i += 2
            while g[i]:
                i += g[i] + 1
            i += 1
        assert g[i] == 0x2C
        struct.pack_into("<HH", g, i + 1, 3, 2)
        emit(name, "gif", bytes(g))

    # BMP
    emit("bmp_24", "bmp", save(im_rgb, "BMP"))
    emit("bmp_8", "bmp", save(im_p, "BMP"))
    emit("bmp_gray", "bmp", save(im_l, "BMP"))
    emit("bmp_1", "bmp", save(im_l.convert("1"), "BMP"))
    emit("bmp_32", "bmp", save(im_rgba, "BMP"))
    # Top-down (negative height) 24-bit BMP: flip the stored rows of bmp_24 by hand.
    b = bytearray(save(im_rgb, "BMP"))
    off = struct.unpack_from("<I", b, 10)[0]
    stride = (W * 3 + 3) & ~3
    rows = [b[off + i * stride: off + (i + 1) * stride] for i in range(H)]
    b[off:off + H * stride] = b"".join(reversed(rows))
    struct.pack_into("<i", b, 22, -H)
    emit("bmp_topdown", "bmp", bytes(b))

    # Hand-made BMP variants. 16-bit: every 5/6-bit level appears (x + 13 * y covers 0..90).
    lv = np.arange(W * H).reshape(H, W)[::-1]  # bottom-up storage
    p555 = ((lv % 32) << 10) | (((lv * 7) % 32) << 5) | ((lv * 3) % 32)
    p565 = ((lv % 32) << 11) | (((lv * 5) % 64) << 5) | ((lv * 3) % 32)
    def rows16(p):
        return b"".join(r.astype("<u2").tobytes() + b"\0" * ((-W * 2) % 4) for r in p)
    emit("bmp_555", "bmp", bmp_file(W, H, 16, rows16(p555)))
    emit("bmp_565", "bmp", bmp_file(W, H, 16, rows16(p565), compression=3, masks=(0xF800, 0x7E0, 0x1F)))
    # 32-bit RGBA-ordered bitfields inside a V4 header (108 bytes).
    px = rgba[::-1].tobytes()
    emit("bmp_32_rgba_masks", "bmp", bmp_file(W, H, 32, px, compression=3, header=108,
                                              masks=(0xFF, 0xFF00, 0xFF0000, 0xFF000000)))
    pal = np.asarray(im_p.getpalette()[:48], dtype=np.uint8).reshape(16, 3)
    pal_bytes = b"".join(bytes([c[2], c[1], c[0], 0]) for c in pal)
    idx = np.asarray(im_p)
    emit("bmp_rle8", "bmp", bmp_file(W, H, 8, rle_encode(idx, False), compression=1, palette=pal_bytes))
    emit("bmp_rle4", "bmp", bmp_file(W, H, 4, rle_encode(idx, True), compression=2, palette=pal_bytes))

    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total} bytes to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
