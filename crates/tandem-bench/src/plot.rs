//! Line plots, as SVG (plotters' SVG backend: text is left to the
//! viewer's fonts, so nothing beyond the crate is needed to draw) or as PNG
//! (the same drawing in pixels, see `raster`).
//!
//! Log axes are drawn as linear axes over log10 of the data with labels
//! written back as powers, which keeps one code path for every combination.

use plotters::prelude::*;

use super::analyze::Table;
use super::kernels::size_text;

/// One curve.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// (x, y, interval low, interval high)
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// A plot's axes and title.
#[derive(Clone, Debug)]
pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    /// x values are byte counts (labels as 1 KiB, 4 MiB...).
    pub x_bytes: bool,
    /// x values are small integers (rank counts): labels only on integers.
    pub x_integer: bool,
    pub series: Vec<Series>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn short_bytes(v: f64) -> String {
    let s = v.round().max(0.0) as u64;
    if (v - s as f64).abs() > 1e-6 * v.max(1.0) {
        return format!("{v:.3}");
    }
    size_text(s)
        .replace(" KiB", "K")
        .replace(" MiB", "M")
        .replace(" B", "")
}

/// A tick label: `v` is the axis coordinate (log2 of bytes or log10 of
/// values on log axes).
fn tick(v: f64, log: bool, bytes: bool) -> String {
    if log && (v - v.round()).abs() > 1e-6 {
        return String::new();
    }
    if bytes {
        return short_bytes(if log { 2f64.powf(v.round()) } else { v });
    }
    if log {
        let e = v.round() as i32;
        return if (-3..=5).contains(&e) {
            trim(10f64.powi(e))
        } else {
            format!("1e{e}")
        };
    }
    trim(v)
}

/// A number without trailing zeros.
fn trim(v: f64) -> String {
    let s = super::output::num(v);
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Whether values spanning [lo, hi] are better shown on a log axis.
pub fn wants_log(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi / lo >= 50.0
}

/// Draws the plot as an SVG document.
pub fn svg(plot: &Plot, size: (u32, u32)) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        draw(plot, &root).map_err(|e| format!("cannot draw the plot: {e}"))?;
        root.present()
            .map_err(|e| format!("cannot draw the plot: {e}"))?;
    }
    Ok(buf)
}

/// Text sizes in pixels: tick labels and legend entries, axis names, the
/// title. A plot is shown at about its own size, so these stay legible.
const TICK_PX: u32 = 14;
const AXIS_PX: u32 = 15;
const TITLE_PX: u32 = 18;

/// Marker shapes, one per series (with the colour, so that series stay
/// apart in grey or for a reader who cannot tell two colours apart).
const MARKERS: usize = 7;

/// The colour and marker of series `i`: eight colours, and past them the
/// markers shifted, so that no two of the first 56 series look alike.
fn look(i: usize) -> (RGBColor, usize) {
    (COLORS[i % COLORS.len()], (i + i / COLORS.len()) % MARKERS)
}

/// Draws marker `shape` centred on backend pixel `at`.
fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    at: (i32, i32),
    shape: usize,
    color: RGBColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let r = 5;
    let filled = color.filled();
    let outline = color.stroke_width(2);
    let e = EmptyElement::at(at);
    match shape {
        0 => area.draw(&(e + Circle::new((0, 0), r, filled))),
        1 => area.draw(&(e + Rectangle::new([(-r + 1, -r + 1), (r - 1, r - 1)], filled))),
        2 => area.draw(&(e + Polygon::new(vec![(0, -r - 1), (r, r - 1), (-r, r - 1)], filled))),
        3 => area.draw(
            &(e + Polygon::new(
                vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
                filled,
            )),
        ),
        4 => area.draw(&(e + Circle::new((0, 0), r, outline))),
        5 => area.draw(&(e + Rectangle::new([(-r + 1, -r + 1), (r - 1, r - 1)], outline))),
        _ => area.draw(
            &(e + PathElement::new(vec![(-r, -r), (r, r)], outline)
                + PathElement::new(vec![(-r, r), (r, -r)], outline)),
        ),
    }
}

/// The width of the legend column for `plot` on a drawing `width` pixels
/// wide: enough for the longest name (about 0.6 em per character), at most
/// a third of the drawing; 0 without a legend.
fn legend_width(plot: &Plot, width: u32) -> u32 {
    let named = plot.series.len() > 1 || plot.series.iter().any(|s| !s.name.is_empty());
    if !named {
        return 0;
    }
    let chars = plot
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0) as u32;
    (chars * TICK_PX * 6 / 10 + 48).clamp(90, width / 3)
}

/// Draws the plot on any plotters backend: the chart, and the legend in a
/// column to its right, outside the data. Each series is a line with its
/// own colour and marker, over a band of the same colour that spans its
/// confidence intervals.
pub(super) fn draw<DB: DrawingBackend>(
    plot: &Plot,
    root: &DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (width, _) = root.dim_in_pixel();
    let legend_w = legend_width(plot, width);
    let (area, legend) = root.split_horizontally(width - legend_w);
    // Byte counts go on a log2 axis (powers of two fall on ticks), other
    // log axes are log10.
    let tx = |x: f64| match (plot.log_x, plot.x_bytes) {
        (true, true) => x.log2(),
        (true, false) => x.log10(),
        _ => x,
    };
    let ty = |y: f64| if plot.log_y { y.log10() } else { y };
    let usable = |p: &(f64, f64, f64, f64)| {
        p.0.is_finite()
            && p.1.is_finite()
            && (!plot.log_x || p.0 > 0.0)
            && (!plot.log_y || p.1 > 0.0)
    };
    // An interval's ends on the y axis (its low end at the median where a
    // log axis cannot show it).
    let ends = |p: &(f64, f64, f64, f64)| {
        let lo = if (plot.log_y && p.2 <= 0.0) || !p.2.is_finite() {
            p.1
        } else {
            p.2.min(p.1)
        };
        let hi = if p.3.is_finite() { p.3.max(p.1) } else { p.1 };
        (ty(lo), ty(hi))
    };
    let pts: Vec<(f64, f64)> = plot
        .series
        .iter()
        .flat_map(|s| s.points.iter().filter(|p| usable(p)))
        .flat_map(|p| {
            let (lo, hi) = ends(p);
            [(tx(p.0), ty(p.1)), (tx(p.0), lo), (tx(p.0), hi)]
        })
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    let (mut x0, mut x1, mut y0, mut y1) = pts.iter().fold(
        (
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ),
        |a, p| (a.0.min(p.0), a.1.max(p.0), a.2.min(p.1), a.3.max(p.1)),
    );
    if pts.is_empty() {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    if y1 - y0 < 1e-12 {
        let d = if y0 == 0.0 { 1.0 } else { y0.abs() * 0.1 };
        y0 -= d;
        y1 += d;
    }
    let ypad = (y1 - y0) * 0.06;
    let xpad = (x1 - x0) * 0.03;
    if !plot.log_y && y0 >= 0.0 {
        y0 = 0.0;
    } else {
        y0 -= ypad;
    }
    let mut chart = ChartBuilder::on(&area)
        .caption(&plot.title, ("sans-serif", TITLE_PX))
        .margin(12)
        .x_label_area_size(52)
        .y_label_area_size(78)
        .build_cartesian_2d((x0 - xpad)..(x1 + xpad), y0..(y1 + ypad))?;
    let (log_x, log_y, bytes, integer) = (plot.log_x, plot.log_y, plot.x_bytes, plot.x_integer);
    let x_fmt = move |v: &f64| {
        if integer && !log_x && (v - v.round()).abs() > 1e-6 {
            String::new()
        } else {
            tick(*v, log_x, bytes)
        }
    };
    let y_fmt = move |v: &f64| tick(*v, log_y, false);
    chart
        .configure_mesh()
        .x_desc(format!(
            "{}{}",
            plot.x_label,
            if log_x { " (log)" } else { "" }
        ))
        .y_desc(format!(
            "{}{}",
            plot.y_label,
            if log_y { " (log)" } else { "" }
        ))
        .label_style(("sans-serif", TICK_PX))
        .axis_desc_style(("sans-serif", AXIS_PX))
        .x_labels(if log_x {
            24
        } else if integer {
            ((x1 - x0).round() as usize + 1).clamp(2, 20)
        } else {
            10
        })
        .y_labels(if log_y { 20 } else { 10 })
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
    for (i, s) in plot.series.iter().enumerate() {
        let (color, _) = look(i);
        let mut kept: Vec<&(f64, f64, f64, f64)> = s.points.iter().filter(|p| usable(p)).collect();
        kept.sort_by(|a, b| a.0.total_cmp(&b.0));
        // The confidence intervals as a band: up along the high ends, back
        // along the low ends (a bar where there is a single point).
        let band: Vec<(f64, f64)> = kept
            .iter()
            .map(|p| (tx(p.0), ends(p).1))
            .chain(kept.iter().rev().map(|p| (tx(p.0), ends(p).0)))
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        if kept.len() > 1 {
            chart.draw_series(std::iter::once(Polygon::new(
                band,
                color.mix(0.18).filled(),
            )))?;
        } else if let Some(p) = kept.first() {
            let (lo, hi) = ends(p);
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(tx(p.0), lo), (tx(p.0), hi)],
                color.mix(0.5).stroke_width(4),
            )))?;
        }
        lines.push(kept.iter().map(|p| (tx(p.0), ty(p.1))).collect());
    }
    // Lines and markers over every band.
    for (i, line) in lines.iter().enumerate() {
        let (color, shape) = look(i);
        chart.draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?;
        for p in line {
            marker(root, chart.backend_coord(p), shape, color)?;
        }
    }
    if legend_w > 0 {
        let (_, h) = legend.dim_in_pixel();
        let step = (TICK_PX + 10) as i32;
        let top = (h as i32 - step * plot.series.len() as i32).clamp(40, 60);
        let (lx, _) = legend.get_base_pixel();
        for (i, s) in plot.series.iter().enumerate() {
            let (color, shape) = look(i);
            let y = top + i as i32 * step;
            root.draw(&PathElement::new(
                vec![(lx + 4, y), (lx + 30, y)],
                color.stroke_width(2),
            ))?;
            marker(root, (lx + 17, y), shape, color)?;
            legend.draw(&Text::new(
                s.name.clone(),
                (38, y - TICK_PX as i32 / 2 - 1),
                ("sans-serif", TICK_PX).into_font().color(&BLACK),
            ))?;
        }
    }
    Ok(())
}

/// Checks, before anything is measured, that a plot can be written to
/// `path`: an .svg or .png name, and for PNG a font for the text.
pub fn check_path(path: &std::path::Path) -> Result<(), String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(()),
        Some("png") => super::raster::find_font().map(|_| ()),
        _ => Err(format!(
            "{}: name the plot file .svg or .png",
            path.display()
        )),
    }
}

/// Writes `plot` to `path`, as SVG or PNG by the file's extension.
pub fn write(plot: &Plot, path: &std::path::Path) -> Result<(), String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => {
            let text = svg(plot, (900, 560))?;
            super::output::write_file(path, text.as_bytes())
        }
        Some("png") => {
            let bytes = super::raster::png(plot, (900, 560))?;
            super::output::write_file(path, &bytes)
        }
        _ => Err(format!(
            "{}: name the plot file .svg or .png",
            path.display()
        )),
    }
}

/// The plot of a table's metric `metric` with one curve per (library,
/// group); `tables` pairs a library name with its table.
pub fn of_tables(tables: &[(String, &Table)], metric: usize, title: &str) -> Option<Plot> {
    let first = tables.first()?.1;
    let m = first.metrics.get(metric)?;
    let mut series: Vec<Series> = Vec::new();
    for (lib, t) in tables {
        let mut groups: Vec<String> = Vec::new();
        for r in &t.rows {
            if !groups.contains(&r.group) {
                groups.push(r.group.clone());
            }
        }
        for g in groups {
            let name = match (tables.len() > 1, g.is_empty()) {
                (true, true) => lib.clone(),
                (true, false) => format!("{lib} {g}"),
                (false, _) => g.clone(),
            };
            let points: Vec<(f64, f64, f64, f64)> = t
                .rows
                .iter()
                .filter(|r| r.group == g)
                .filter_map(|r| {
                    r.values
                        .get(metric)
                        .copied()
                        .flatten()
                        .map(|s| (r.x, s.median, s.lo, s.hi))
                })
                .collect();
            if !points.is_empty() {
                series.push(Series { name, points });
            }
        }
    }
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let (xmin, xmax) = xs
        .iter()
        .fold((f64::INFINITY, 0.0f64), |a, &x| (a.0.min(x), a.1.max(x)));
    let (ymin, ymax) = ys
        .iter()
        .fold((f64::INFINITY, 0.0f64), |a, &y| (a.0.min(y), a.1.max(y)));
    let log_x = first.x_log && wants_log(xmin, xmax);
    Some(Plot {
        title: title.to_string(),
        x_label: first.x_label.clone(),
        y_label: format!("{} ({})", m.name, m.unit),
        log_x,
        log_y: m.unit != "%" && wants_log(ymin, ymax),
        x_bytes: first.x_label.contains("bytes") || first.x_label.contains("size"),
        x_integer: xs.iter().all(|x| x.fract() == 0.0) && xmax - xmin <= 64.0,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_is_well_formed() {
        let plot = Plot {
            title: "latency".into(),
            x_label: "message size (bytes)".into(),
            y_label: "latency (us)".into(),
            log_x: true,
            log_y: true,
            x_bytes: true,
            x_integer: false,
            series: vec![
                Series {
                    name: "tandem".into(),
                    points: vec![
                        (1.0, 7.0, 6.5, 7.5),
                        (1024.0, 9.0, 8.0, 10.0),
                        (1048576.0, 300.0, 280.0, 320.0),
                    ],
                },
                Series {
                    name: "openmpi".into(),
                    points: vec![(1.0, 8.0, 7.0, 9.0), (1048576.0, 280.0, 270.0, 290.0)],
                },
            ],
        };
        let s = svg(&plot, (600, 400)).unwrap();
        assert!(s.starts_with("<svg"), "{}", &s[..50]);
        assert!(s.trim_end().ends_with("</svg>"));
        assert!(s.contains("tandem") && s.contains("openmpi"));
        assert!(s.contains("\n1M\n"), "no 1M tick label");
        // An empty plot still draws.
        let empty = Plot {
            series: vec![],
            ..plot
        };
        assert!(svg(&empty, (300, 200)).unwrap().contains("</svg>"));
    }

    #[test]
    fn other_formats_are_refused() {
        let plot = Plot {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            log_x: false,
            log_y: false,
            x_bytes: false,
            x_integer: false,
            series: vec![],
        };
        let e = write(&plot, std::path::Path::new("/nonexistent/x.jpg")).unwrap_err();
        assert!(e.contains(".svg or .png"), "{e}");
        assert!(check_path(std::path::Path::new("x.JPG")).is_err());
        assert!(check_path(std::path::Path::new("x.svg")).is_ok());
    }

    #[test]
    fn ticks() {
        assert_eq!(tick(3.0, true, false), "1000");
        assert_eq!(tick(2.5, true, false), "");
        assert_eq!(tick(10.0, true, true), "1K");
        assert_eq!(tick(22.0, true, true), "4M");
        assert_eq!(tick(7.0, false, true), "7");
        assert_eq!(tick(80.0, false, false), "80");
        assert_eq!(tick(2.5, false, false), "2.5");
    }
}
