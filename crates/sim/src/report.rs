//! Writers for replay results: the window shares as CSV, their plot as SVG (like seed 000's
//! Figure 1), and the summary as a text table. Front ends (the `iosets` command, scripts, a server's
//! report endpoint) call these rather than format results themselves.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::shares::{QueueKey, WindowShares};
use crate::summary::Summary;
use crate::SimError;

/// Writes one CSV row per window: `window_start,window_end,time_s,<queue...>`, one share column
/// per queue (fractions of the window's bytes, named by [`QueueKey::column`]). `window_end` is one
/// past the window's last request; `time_s` is the dispatch time of that last request.
pub fn write_shares_csv<W: Write>(mut out: W, shares: &WindowShares) -> std::io::Result<()> {
    let mut header = String::from("window_start,window_end,time_s");
    for q in &shares.queues {
        header.push(',');
        header.push_str(&q.queue.column());
    }
    writeln!(out, "{header}")?;
    for w in &shares.windows {
        let mut line = format!("{},{},{:.9}", w.start, w.end, w.time.as_secs_f64());
        for s in &w.shares {
            let _ = write!(line, ",{s:.6}");
        }
        writeln!(out, "{line}")?;
    }
    out.flush()
}

/// [`write_shares_csv`] to the file at `path` (created or truncated).
pub fn save_shares_csv(path: &Path, shares: &WindowShares) -> Result<(), SimError> {
    let io = |error| SimError::Io {
        path: Some(path.to_path_buf()),
        error,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    write_shares_csv(std::io::BufWriter::new(file), shares).map_err(io)
}

/// Line colours, distinguishable and print-friendly (Okabe–Ito), then plotters' palette.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(213, 94, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(240, 228, 66),
];

pub(crate) fn colour(i: usize) -> RGBColor {
    COLOURS.get(i).copied().unwrap_or_else(|| {
        let c = Palette99::pick(i).to_rgba();
        RGBColor(c.0, c.1, c.2)
    })
}

/// Draws the share of each queue over the windows as an SVG at `path`: x is the dispatch index at
/// which the window starts, y the queue's share of the window's bytes in percent, one line per
/// queue. `expected` (queue → expected share as a fraction) adds a dashed line at each queue's
/// expected share and puts it in the legend.
pub fn save_shares_svg(
    path: &Path,
    shares: &WindowShares,
    expected: &BTreeMap<QueueKey, f64>,
    title: &str,
) -> Result<(), SimError> {
    draw_svg(path, shares, expected, title).map_err(|message| SimError::Plot {
        path: path.to_path_buf(),
        message,
    })
}

fn draw_svg(
    path: &Path,
    shares: &WindowShares,
    expected: &BTreeMap<QueueKey, f64>,
    title: &str,
) -> Result<(), String> {
    let e = |err: &dyn std::fmt::Display| err.to_string();
    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let x_max = shares.windows.last().map_or(1, |w| w.start.max(1));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(0..x_max, 0f64..100f64)
        .map_err(|x| e(&x))?;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(format!(
        "dispatched requests (index of the first request of each {}-request window)",
        shares.window
    ))
    .y_desc("share of the window's bytes (%)")
    .y_labels(11)
    .y_label_formatter(&|y| format!("{y:.0}"));
    mesh_style(&mut mesh).draw().map_err(|x| e(&x))?;
    for (i, q) in shares.queues.iter().enumerate() {
        let c = colour(i);
        let label = match expected.get(&q.queue) {
            Some(x) => format!("{} (expected {:.1}%)", q.queue, x * 100.0),
            None => q.queue.to_string(),
        };
        let points = shares
            .windows
            .iter()
            .map(|w| (w.start, w.shares[i] * 100.0));
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        if let Some(x) = expected.get(&q.queue) {
            let y = x * 100.0;
            chart
                .draw_series(DashedLineSeries::new(
                    [(0, y), (x_max, y)],
                    8,
                    6,
                    c.mix(0.8).stroke_width(1),
                ))
                .map_err(|x| e(&x))?;
        }
    }
    finish(&root, &mut chart, SeriesLabelPosition::UpperLeft)
}

/// The replay and sweep plots' axis descriptions, labels and grid lines.
pub(crate) fn mesh_style<'m, 'a, 'b, X: Ranged, Y: Ranged, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB> {
    mesh.axis_desc_style(("sans-serif", 16))
        .label_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(210, 210, 210))
}

/// Draws the legend of `chart` at `position` (on white, a grey border) and writes out `root`,
/// the plot `chart` is drawn on.
pub(crate) fn finish<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(160, 160, 160))
        .draw()
        .map_err(|x| x.to_string())?;
    root.present().map_err(|x| x.to_string())
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{:.1}%", v * 100.0))
}

fn ms(n: iosets_types::Nanos) -> String {
    format!("{:.3}", n.as_secs_f64() * 1e3)
}

/// The summary as a text table: one line per queue, then the totals.
///
/// Columns: queue; weight; expected share; share of the bytes dispatched while all queues were
/// backlogged; mean, min and max share over the backlogged windows; requests; MiB; time the queue
/// drained (its last dispatch, s); mean and p99 queue wait (ms).
pub fn summary_table(s: &Summary) -> String {
    let mut out = String::new();
    let header = [
        "queue",
        "weight",
        "expect",
        "busy",
        "win mean",
        "win min",
        "win max",
        "reqs",
        "MiB",
        "drained s",
        "wait ms",
        "p99 ms",
    ];
    let rows: Vec<[String; 12]> = s
        .queues
        .iter()
        .map(|q| {
            [
                q.queue.to_string(),
                q.weight.map_or_else(|| "-".to_string(), |w| format!("{w}")),
                pct(q.expected_share),
                pct(q.busy_share),
                pct(q.window_mean),
                pct(q.window_min),
                pct(q.window_max),
                q.requests.to_string(),
                format!("{:.1}", q.bytes as f64 / 1_048_576.0),
                format!("{:.4}", q.drain_time.as_secs_f64()),
                ms(q.mean_wait),
                ms(q.p99_wait),
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(width).enumerate() {
            if i == 0 {
                let _ = write!(l, "{c:<w$}");
            } else {
                let _ = write!(l, "  {c:>w$}");
            }
        }
        l
    };
    let _ = writeln!(out, "{}", line(&header.map(String::from)));
    for r in &rows {
        let _ = writeln!(out, "{}", line(r));
    }
    let _ = writeln!(
        out,
        "policy {}: {} requests in {} batches, {:.1} MiB, makespan {:.4} s, throughput {:.1} MiB/s",
        s.policy,
        s.requests,
        s.batches,
        s.bytes as f64 / 1_048_576.0,
        s.makespan.as_secs_f64(),
        s.throughput / 1_048_576.0,
    );
    let _ = writeln!(
        out,
        "shares by {} over {}-request windows: {} windows, {} with every queue backlogged\n\
         (expect = weight / total weight; busy = share of the bytes dispatched while every queue \
         was backlogged;\n win mean/min/max = over the backlogged windows)",
        s.key, s.window, s.windows, s.backlogged_windows
    );
    out
}
