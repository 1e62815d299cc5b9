//! The experiment's figures: seed 004's Figure 4 (the four metrics per configuration, a box per
//! configuration over the repetitions) and, per run, each job's bandwidth on each server over
//! time (one panel per server, so that exclusivity inside a set shows as one colour at a time).

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::analysis::Served;
use crate::rig::plots::{draw_category_mesh, err, job_colour, legend_row};

/// The metrics' labels, in the order of the values.
pub(crate) const METRIC_LABELS: [&str; 4] = [
    "max stretch",
    "geomean stretch",
    "I/O slowdown",
    "utilization",
];

/// Quartiles of sorted `xs` (linear interpolation).
fn quantile(xs: &[f64], q: f64) -> f64 {
    let pos = q * (xs.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    xs[lo] + (xs[hi] - xs[lo]) * (pos - lo as f64)
}

/// One configuration's values of the four metrics over its repetitions, and the simulator's
/// prediction.
#[derive(Debug)]
pub(crate) struct BoxSeries {
    /// The configuration's name.
    pub(crate) name: String,
    /// Per metric, one value per repetition.
    pub(crate) values: [Vec<f64>; 4],
    /// Per metric, the simulator's value.
    pub(crate) predicted: Option<[f64; 4]>,
}

/// Draws seed 004's Figure 4: a panel per metric, a box per configuration (quartiles, median,
/// whiskers from the smallest to the largest repetition, every repetition as a dot), the
/// simulator's prediction as a cross.
pub(crate) fn save_box(path: &Path, series: &[BoxSeries], title: &str) -> Result<()> {
    let root = SVGBackend::new(path, (1100, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(40);
    top.titled(title, ("sans-serif", 18)).map_err(err)?;
    let panels = body.split_evenly((2, 2));
    let n = series.len();
    for (m, panel) in panels.iter().enumerate() {
        let mut all: Vec<f64> = series
            .iter()
            .flat_map(|s| s.values[m].iter().copied().chain(s.predicted.map(|p| p[m])))
            .filter(|v| v.is_finite())
            .collect();
        if all.is_empty() {
            all = vec![0.0, 1.0];
        }
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.02).max(1e-3);
        let names: Vec<String> = series.iter().map(|s| s.name.clone()).collect();
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!(
                    "{} ({} is better)",
                    METRIC_LABELS[m],
                    if m == 3 { "higher" } else { "lower" }
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), (lo - pad)..(hi + pad))
            .map_err(err)?;
        draw_category_mesh(&mut chart, &names, |_| {})?;
        for (i, s) in series.iter().enumerate() {
            let x = i as f64;
            let mut v: Vec<f64> = s.values[m]
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .collect();
            v.sort_by(f64::total_cmp);
            let c = if i == 0 {
                RGBColor(120, 120, 120)
            } else {
                RGBColor(31, 119, 180)
            };
            if !v.is_empty() {
                let (q1, q2, q3) = (quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75));
                let (min, max) = (v[0], v[v.len() - 1]);
                let w = 0.25;
                chart
                    .draw_series([
                        Rectangle::new([(x - w, q1), (x + w, q3)], c.mix(0.25).filled()),
                        Rectangle::new([(x - w, q1), (x + w, q3)], c.stroke_width(1)),
                    ])
                    .map_err(err)?;
                chart
                    .draw_series([
                        PathElement::new(vec![(x - w, q2), (x + w, q2)], c.stroke_width(3)),
                        PathElement::new(vec![(x, min), (x, q1)], c.stroke_width(1)),
                        PathElement::new(vec![(x, q3), (x, max)], c.stroke_width(1)),
                        PathElement::new(
                            vec![(x - w / 2.0, min), (x + w / 2.0, min)],
                            c.stroke_width(1),
                        ),
                        PathElement::new(
                            vec![(x - w / 2.0, max), (x + w / 2.0, max)],
                            c.stroke_width(1),
                        ),
                    ])
                    .map_err(err)?;
                chart
                    .draw_series(v.iter().map(|&y| Circle::new((x, y), 3, c.filled())))
                    .map_err(err)?;
            }
            if let Some(p) = s.predicted {
                if p[m].is_finite() {
                    chart
                        .draw_series([Cross::new((x + 0.35, p[m]), 6, RED.stroke_width(2))])
                        .map_err(err)?;
                }
            }
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Draws each job's bandwidth on each server over `[0, end]` seconds (stacked bars, `bins` of
/// them), one panel per server, with the metrics window shaded.
pub(crate) fn save_timeline(
    path: &Path,
    served: &[Served],
    servers: usize,
    window: (f64, f64),
    title: &str,
) -> Result<()> {
    const BINS: usize = 400;
    let end = served
        .iter()
        .map(|s| s.end)
        .fold(window.1, f64::max)
        .max(1e-3);
    let width = end / BINS as f64;
    let mut jobs: Vec<u64> = served.iter().map(|s| s.job).collect();
    jobs.sort_unstable();
    jobs.dedup();
    // bins[server][bin][job index]: bytes.
    let mut bins = vec![vec![vec![0.0f64; jobs.len()]; BINS]; servers];
    for s in served.iter().filter(|s| s.server < servers) {
        let j = jobs.binary_search(&s.job).expect("listed");
        let (a, b) = (s.start.max(0.0), s.end.max(0.0));
        if b <= a {
            let k = ((a / width) as usize).min(BINS - 1);
            bins[s.server][k][j] += s.bytes as f64;
            continue;
        }
        let rate = s.bytes as f64 / (b - a);
        let (first, last) = (
            ((a / width) as usize).min(BINS - 1),
            ((b / width) as usize).min(BINS - 1),
        );
        for (k, bin) in bins[s.server]
            .iter_mut()
            .enumerate()
            .take(last + 1)
            .skip(first)
        {
            let (lo, hi) = (k as f64 * width, (k + 1) as f64 * width);
            let inside = (b.min(hi) - a.max(lo)).max(0.0);
            bin[j] += rate * inside;
        }
    }
    let mib_s = |bytes: f64| bytes / width / 1_048_576.0;
    let peak = bins
        .iter()
        .flat_map(|s| s.iter().map(|b| mib_s(b.iter().sum())))
        .fold(1.0f64, f64::max);

    let height = 160 + 220 * servers as u32;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(60);
    let (title_area, legend) = top.split_vertically(32);
    title_area.titled(title, ("sans-serif", 18)).map_err(err)?;
    let entries: Vec<(RGBColor, String)> = jobs
        .iter()
        .map(|&job| (job_colour(job), format!("job {job}")))
        .collect();
    let step = (1200 / jobs.len().max(1) as i32).clamp(40, 72);
    legend_row(&legend, &entries, (16, step), 12, 16)?;
    let panels = body.split_evenly((servers, 1));
    for (server, panel) in panels.iter().enumerate() {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("server {server}: MiB/s per job (shaded: the metrics window)"),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end, 0.0..peak * 1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds after the first application's start")
            .label_style(("sans-serif", 12))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(err)?;
        chart
            .draw_series([Rectangle::new(
                [(window.0, 0.0), (window.1, peak * 1.05)],
                RGBColor(250, 245, 220).filled(),
            )])
            .map_err(err)?;
        for (k, bin) in bins[server].iter().enumerate() {
            let x0 = k as f64 * width;
            let mut y = 0.0;
            let mut rects = Vec::new();
            for (j, &bytes) in bin.iter().enumerate() {
                if bytes <= 0.0 {
                    continue;
                }
                let h = mib_s(bytes);
                rects.push(Rectangle::new(
                    [(x0, y), (x0 + width, y + h)],
                    job_colour(jobs[j]).filled(),
                ));
                y += h;
            }
            chart.draw_series(rects).map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quartiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 0.25), 2.0);
        assert_eq!(quantile(&[2.0], 0.75), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.5), 1.5);
    }

    #[test]
    fn figures_are_written() {
        let dir = std::env::temp_dir().join(format!("iosets-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let series = vec![
            BoxSeries {
                name: "timeorder".into(),
                values: [
                    vec![1.5, 1.6],
                    vec![1.2, 1.3],
                    vec![3.0, 3.5],
                    vec![0.7, 0.72],
                ],
                predicted: Some([1.5, 1.25, 3.2, 0.7]),
            },
            BoxSeries {
                name: "clairvoyant".into(),
                values: [vec![1.2], vec![1.1], vec![1.5], vec![0.85]],
                predicted: None,
            },
        ];
        let b = dir.join("box.svg");
        save_box(&b, &series, "test").unwrap();
        let text = std::fs::read_to_string(&b).unwrap();
        assert!(text.contains("clairvoyant") && text.contains("utilization"));
        let served = [
            Served {
                server: 0,
                job: 1,
                start: 0.5,
                end: 0.6,
                bytes: 1 << 20,
            },
            Served {
                server: 1,
                job: 2,
                start: 1.0,
                end: 3.0,
                bytes: 8 << 20,
            },
        ];
        let t = dir.join("timeline.svg");
        save_timeline(&t, &served, 2, (1.0, 4.0), "test").unwrap();
        let text = std::fs::read_to_string(&t).unwrap();
        assert!(text.contains("server 1") && text.contains("job 2"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
