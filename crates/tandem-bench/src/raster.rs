//! PNG plots: the drawing of `plot::draw` made in an RGB buffer by
//! plotters' bitmap backend and encoded with the `png` crate.
//!
//! Pixels need glyphs, which SVG leaves to its viewer: text is drawn with a
//! TrueType font found on the system (DejaVu Sans on Debian, package
//! `fonts-dejavu-core`), rasterised by `ab_glyph`. plotters' own `ab_glyph`
//! feature would make every plot, SVG included, fail without that font, so
//! the text goes through a thin wrapper around the bitmap backend instead
//! and SVG keeps needing nothing.

use std::path::{Path, PathBuf};

use ab_glyph::{Font, FontVec, PxScale, ScaleFont};
use plotters::backend::BitMapBackend;
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

use super::plot::Plot;

/// The Debian package with the font PNG plots prefer.
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";

/// Fonts tried first, by where distributions install them.
const PREFERRED: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Directories searched for any other TrueType font.
const FONT_DIRS: &[&str] = &["/usr/share/fonts", "/usr/local/share/fonts"];

/// How well a font file suits plot labels: 0 is a plain sans-serif face,
/// higher is worse.
fn font_rank(path: &Path) -> u32 {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let styled = ["bold", "italic", "oblique", "mono", "condensed", "light"]
        .iter()
        .any(|s| name.contains(s));
    match (name.contains("sans"), styled) {
        (true, false) => 0,
        (false, false) => 1,
        (true, true) => 2,
        (false, true) => 3,
    }
}

fn collect_ttf(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if depth > 0 {
                collect_ttf(&p, depth - 1, out);
            }
        } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
            out.push(p);
        }
    }
}

/// The font PNG plots use: a preferred one, else the plainest TrueType
/// font under the system's font directories.
pub fn find_font() -> Result<PathBuf, String> {
    find_font_in(PREFERRED, FONT_DIRS)
}

fn find_font_in(preferred: &[&str], dirs: &[&str]) -> Result<PathBuf, String> {
    if let Some(p) = preferred.iter().map(Path::new).find(|p| p.is_file()) {
        return Ok(p.to_path_buf());
    }
    let mut found = Vec::new();
    for d in dirs {
        collect_ttf(Path::new(d), 4, &mut found);
    }
    found.sort_by_key(|p| (font_rank(p), p.clone()));
    found.into_iter().next().ok_or_else(|| {
        format!(
            "a PNG plot needs a TrueType font for its text and none was found (looked for DejaVu Sans \
             and any .ttf under {}): install Debian's {FONT_PACKAGE} (apt-get install {FONT_PACKAGE}, \
             which scripts/setup.sh does), or name the plot .svg",
            dirs.join(" and ")
        )
    })
}

fn load_font(path: &Path) -> Result<FontVec, String> {
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read font {}: {e}", path.display()))?;
    FontVec::try_from_vec(bytes)
        .map_err(|_| format!("{}: not a usable TrueType font", path.display()))
}

/// A drawing backend that draws text with `font` and everything else with
/// `inner`.
struct TextBackend<'f, B> {
    inner: B,
    font: &'f FontVec,
}

impl<B> TextBackend<'_, B> {
    /// Width, height and ascent of `text` at `size` pixels.
    fn measure(&self, text: &str, size: f64) -> (f32, f32, f32) {
        let f = self.font.as_scaled(PxScale::from(size as f32));
        let mut width = 0.0;
        let mut prev = None;
        for c in text.chars() {
            let id = f.glyph_id(c);
            if let Some(p) = prev {
                width += f.kern(p, id);
            }
            width += f.h_advance(id);
            prev = Some(id);
        }
        (width, f.ascent() - f.descent(), f.ascent())
    }
}

impl<B: DrawingBackend> DrawingBackend for TextBackend<'_, B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (w, h, _) = self.measure(text, style.size());
        Ok((w.ceil() as u32, h.ceil() as u32))
    }

    /// Anchored and rotated as plotters' own text drawing does it, with
    /// each glyph's coverage as the pixel's opacity.
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size();
        let (w, h, ascent) = self.measure(text, size);
        let (w, h) = (w.round() as i32, h.round() as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -w,
            HPos::Center => -w / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -h / 2,
            VPos::Bottom => -h,
        };
        let transform = style.transform();
        let font = self.font;
        let f = font.as_scaled(PxScale::from(size as f32));
        let mut caret = 0.0f32;
        let mut prev = None;
        let mut pixels: Vec<(i32, i32, f32)> = Vec::new();
        for c in text.chars() {
            let id = f.glyph_id(c);
            if let Some(p) = prev {
                caret += f.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(f.scale(), ab_glyph::point(caret, ascent));
            caret += f.h_advance(id);
            let Some(outline) = font.outline_glyph(glyph) else {
                continue;
            };
            let b = outline.px_bounds();
            let (x0, y0) = (b.min.x as i32, b.min.y as i32);
            outline.draw(|x, y, coverage| {
                if coverage > 0.0 {
                    pixels.push((x0 + x as i32, y0 + y as i32, coverage.min(1.0)));
                }
            });
        }
        for (x, y, coverage) in pixels {
            let (x, y) = transform.transform(x + dx, y + dy);
            self.inner.draw_pixel(
                (pos.0 + x, pos.1 + y),
                BackendColor {
                    alpha: color.alpha * f64::from(coverage),
                    rgb: color.rgb,
                },
            )?;
        }
        Ok(())
    }
}

/// Draws the plot as a PNG image of `size` pixels.
pub fn png(plot: &Plot, size: (u32, u32)) -> Result<Vec<u8>, String> {
    let font = load_font(&find_font()?)?;
    let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let backend = TextBackend {
            inner: BitMapBackend::with_buffer(&mut rgb, size),
            font: &font,
        };
        let root = backend.into_drawing_area();
        super::plot::draw(plot, &root).map_err(|e| format!("cannot draw the plot: {e}"))?;
        root.present()
            .map_err(|e| format!("cannot draw the plot: {e}"))?;
    }
    encode_png(&rgb, size)
}

/// Encodes 8-bit RGB pixels, row by row, as a PNG file.
pub fn encode_png(rgb: &[u8], (w, h): (u32, u32)) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let fail = |e: png::EncodingError| format!("cannot encode the PNG: {e}");
    let mut writer = encoder.write_header().map_err(fail)?;
    writer.write_image_data(rgb).map_err(fail)?;
    writer.finish().map_err(fail)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::plot::Series;
    use super::*;

    /// The width and height in a PNG file's header, if `bytes` starts as a PNG
    /// file does (signature, then the IHDR chunk).
    pub fn png_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
        const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
        if bytes.len() < 24 || bytes[..8] != SIGNATURE || &bytes[12..16] != b"IHDR" {
            return None;
        }
        let word =
            |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        (word(8) == 13).then(|| (word(16), word(20)))
    }

    fn plot() -> Plot {
        Plot {
            title: "latency".into(),
            x_label: "message size (bytes)".into(),
            y_label: "latency (us)".into(),
            log_x: true,
            log_y: true,
            x_bytes: true,
            x_integer: false,
            series: vec![Series {
                name: "tandem".into(),
                points: vec![(1.0, 7.0, 6.5, 7.5), (1048576.0, 300.0, 280.0, 320.0)],
            }],
        }
    }

    #[test]
    fn png_has_signature_header_and_decodes() {
        if let Err(e) = find_font() {
            eprintln!("SKIP png_has_signature_header_and_decodes: {e}");
            return;
        }
        let bytes = png(&plot(), (640, 400)).unwrap();
        assert_eq!(png_dimensions(&bytes), Some((640, 400)));
        // The whole stream decodes to the same size, and text and curves
        // put more than one colour into it.
        let decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (640, 400));
        let pixels = &buf[..info.buffer_size()];
        let dark = pixels
            .chunks(3)
            .filter(|p| p.iter().all(|&c| c < 64))
            .count();
        let blue = pixels.chunks(3).filter(|p| p[2] > 150 && p[0] < 80).count();
        assert!(dark > 500, "hardly any black (text, axes): {dark} pixels");
        assert!(blue > 100, "hardly any of the curve's blue: {blue} pixels");
    }

    #[test]
    fn png_header_check() {
        let tiny = encode_png(&[255, 0, 0, 0, 255, 0], (2, 1)).unwrap();
        assert_eq!(png_dimensions(&tiny), Some((2, 1)));
        assert_eq!(png_dimensions(b"<svg"), None);
        let mut bad = tiny.clone();
        bad[0] = 0;
        assert_eq!(png_dimensions(&bad), None);
    }

    #[test]
    fn a_missing_font_names_the_package() {
        let e = find_font_in(&["/nonexistent/DejaVuSans.ttf"], &["/nonexistent"]).unwrap_err();
        assert!(e.contains("apt-get install fonts-dejavu-core"), "{e}");
        assert!(e.contains(".svg"), "{e}");
    }

    #[test]
    fn plain_sans_fonts_come_first() {
        let mut v: Vec<PathBuf> = [
            "/f/DejaVuSansMono-Bold.ttf",
            "/f/DejaVuSerif.ttf",
            "/f/DejaVuSans-Bold.ttf",
            "/f/LiberationSans-Regular.ttf",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        v.sort_by_key(|p| (font_rank(p), p.clone()));
        assert_eq!(v[0], Path::new("/f/LiberationSans-Regular.ttf"));
        assert_eq!(v[1], Path::new("/f/DejaVuSerif.ttf"));
    }
}
