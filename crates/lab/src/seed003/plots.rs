//! Seed 003's bar charts: per group (an mdtest phase, or the stage-in), one bar per setting
//! (reference, off, on) at the mean of its repetitions, each repetition as a dot (a triangle
//! when it is a lower bound), on a logarithmic axis so that an order of magnitude between the
//! settings stays readable.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::analysis::Series;
use super::params::Setting;
use crate::rig::plots::{draw_category_mesh, err, legend_row, BLUE, GREY, RED};

/// One group of bars.
#[derive(Debug)]
pub(crate) struct Group {
    /// Its label under the axis.
    pub(crate) name: String,
    /// One series per setting, in [`Setting::ALL`]'s order.
    pub(crate) series: Vec<Series>,
}

/// A setting's colour: reference grey, off red, on blue.
fn colour(s: Setting) -> RGBColor {
    match s {
        Setting::Reference => GREY,
        Setting::Off => RED,
        Setting::On => BLUE,
    }
}

/// A value as a label, with fewer decimals the larger it is.
fn label(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// Draws the groups.
pub(crate) fn save_bars(path: &Path, groups: &[Group], title: &str, y_desc: &str) -> Result<()> {
    let values: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.series.iter().flat_map(|s| s.values.iter().map(|v| v.0)))
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if values.is_empty() {
        (0.1, 10.0)
    } else {
        (lo / 3.0, hi * 3.0)
    };
    let width = 360 + 300 * groups.len() as u32;
    let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(64);
    let (title_area, legend) = top.split_vertically(34);
    title_area.titled(title, ("sans-serif", 16)).map_err(err)?;
    let entries: Vec<(RGBColor, String)> = Setting::ALL
        .into_iter()
        .map(|s| (colour(s), s.name().to_string()))
        .collect();
    legend_row(&legend, &entries, (80, 130), 14, 20)?;
    let n = groups.len();
    let names: Vec<String> = groups.iter().map(|g| g.name.clone()).collect();
    let mut chart = ChartBuilder::on(&body)
        .margin(14)
        .x_label_area_size(34)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), (lo..hi).log_scale())
        .map_err(err)?;
    draw_category_mesh(&mut chart, &names, |mesh| {
        mesh.y_desc(y_desc).y_label_formatter(&|y| label(*y));
    })?;
    let w = 0.12;
    for (g, group) in groups.iter().enumerate() {
        for (k, (series, setting)) in group.series.iter().zip(Setting::ALL).enumerate() {
            let x = g as f64 + (k as f64 - 1.0) * 0.28;
            let c = colour(setting);
            let (m, bound) = series.mean();
            if m.is_finite() && m > 0.0 {
                chart
                    .draw_series([Rectangle::new(
                        [(x - w, lo), (x + w, m)],
                        c.mix(0.6).filled(),
                    )])
                    .map_err(err)?;
                chart
                    .draw_series([Text::new(
                        format!("{}{}", if bound { "≥" } else { "" }, label(m)),
                        (x - w, m * 1.12),
                        ("sans-serif", 12),
                    )])
                    .map_err(err)?;
            }
            for &(v, lower) in &series.values {
                if !(v.is_finite() && v > 0.0) {
                    continue;
                }
                if lower {
                    chart
                        .draw_series([TriangleMarker::new((x, v), 6, BLACK.filled())])
                        .map_err(err)?;
                } else {
                    chart
                        .draw_series([Circle::new((x, v), 3, BLACK.filled())])
                        .map_err(err)?;
                }
            }
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_drawn() {
        let dir = std::env::temp_dir().join(format!("iosets-s003-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = |v: &[(f64, bool)]| Series { values: v.to_vec() };
        let groups = vec![
            Group {
                name: "create".into(),
                series: vec![
                    s(&[(1500.0, false), (1600.0, false)]),
                    s(&[(40.0, false), (45.0, false)]),
                    s(&[(900.0, false)]),
                ],
            },
            Group {
                name: "stat".into(),
                series: vec![s(&[(5000.0, false)]), s(&[(60.0, true)]), s(&[])],
            },
        ];
        let p = dir.join("bars.svg");
        save_bars(&p, &groups, "test", "ops/s").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("create") && text.contains("reference") && text.contains("≥60"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
