//! Plots of a sweep: each metric against the swept variable, one line per heuristic (the mean
//! over the workloads) with a shaded band from the smallest to the largest value, as SVG.
//! Same palette as the replay plots ([`crate::report`]).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::metrics::METRIC_NAMES;
use super::sweep::SweepResult;
use super::FluidError;
use crate::report::{colour, finish, mesh_style};

/// A metric's label on an axis.
pub fn metric_label(metric: &str) -> &'static str {
    match metric {
        "max_stretch" => "max stretch (lower is better)",
        "geomean_stretch" => "geometric-mean stretch (lower is better)",
        "io_slowdown" => "I/O slowdown (lower is better)",
        "utilization" => "utilization (higher is better)",
        _ => "value",
    }
}

/// Draws metric `metric` (an index into [`METRIC_NAMES`]) of `result` to the SVG file `path`.
pub fn save_metric_svg(path: &Path, result: &SweepResult, metric: usize) -> Result<(), FluidError> {
    draw(path, result, metric).map_err(|message| FluidError::Plot {
        path: path.to_path_buf(),
        message,
    })
}

/// Draws every metric of `result` into `dir` as `<name>-<metric>.svg`; returns the files.
pub fn save_all(dir: &Path, result: &SweepResult) -> Result<Vec<PathBuf>, FluidError> {
    let mut out = Vec::new();
    for (i, m) in METRIC_NAMES.iter().enumerate() {
        let path = dir.join(format!("{}-{m}.svg", result.name));
        save_metric_svg(&path, result, i)?;
        out.push(path);
    }
    Ok(out)
}

fn draw(path: &Path, result: &SweepResult, metric: usize) -> Result<(), String> {
    let e = |err: &dyn std::fmt::Display| err.to_string();
    let points = result.points();
    let name = METRIC_NAMES[metric];
    let finite = |x: f64| x.is_finite();
    let (mut y_min, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in &points {
        let s = p.stats()[metric];
        for y in [s.min, s.max] {
            if finite(y) {
                y_min = y_min.min(y);
                y_max = y_max.max(y);
            }
        }
    }
    if !(y_min.is_finite() && y_max.is_finite()) {
        (y_min, y_max) = (0.0, 1.0);
    }
    let pad = ((y_max - y_min) * 0.05).max(1e-3);
    let (y_lo, y_hi) = (y_min - pad, y_max + pad);
    let x_lo = result.values.iter().cloned().fold(f64::INFINITY, f64::min);
    let x_hi = result
        .values
        .iter()
        .cloned()
        .fold(f64::NEG_INFINITY, f64::max);
    let (x_lo, x_hi) = if x_hi > x_lo {
        (x_lo, x_hi)
    } else {
        (x_lo - 0.5, x_lo + 0.5)
    };

    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let title = format!(
        "{}: {} vs {} ({} workload{} per value; line = mean, band = min–max)",
        result.name,
        name,
        result.variable,
        result.workloads,
        if result.workloads == 1 { "" } else { "s" }
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(|x| e(&x))?;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(result.variable.as_str())
        .y_desc(metric_label(name));
    mesh_style(&mut mesh).draw().map_err(|x| e(&x))?;
    for (i, h) in result.heuristics.iter().enumerate() {
        let c = colour(i);
        let label = h.to_string();
        let mine: Vec<(f64, f64, f64, f64)> = points
            .iter()
            .filter(|p| p.heuristic == label)
            .map(|p| {
                let s = p.stats()[metric];
                (p.value, s.mean, s.min, s.max)
            })
            .filter(|q| finite(q.1) && finite(q.2) && finite(q.3))
            .collect();
        if result.workloads > 1 && mine.len() > 1 {
            let mut band: Vec<(f64, f64)> = mine.iter().map(|q| (q.0, q.3)).collect();
            band.extend(mine.iter().rev().map(|q| (q.0, q.2)));
            chart
                .draw_series(std::iter::once(Polygon::new(band, c.mix(0.15).filled())))
                .map_err(|x| e(&x))?;
        }
        chart
            .draw_series(LineSeries::new(
                mine.iter().map(|q| (q.0, q.1)),
                c.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        chart
            .draw_series(mine.iter().map(|q| Circle::new((q.0, q.1), 3, c.filled())))
            .map_err(|x| e(&x))?;
    }
    finish(&root, &mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fluid::scenario::Scenario;
    use crate::fluid::sweep::{run_sweep, SweepConfig};

    #[test]
    fn one_svg_per_metric_with_a_line_per_heuristic() {
        let s = Scenario::parse(
            r#"
            name = "plot-test"
            heuristics = ["fair-share", "set-10"]
            [platform]
            bandwidth = 1
            window = [0, 60]
            [[group]]
            count = "k"
            t_cpu = 9
            t_io = 1
            iterations = 6
            [[group]]
            t_cpu = 80
            t_io = 20
            iterations = 1
            [sweep]
            variable = "k"
            values = [1, 2, 3]
        "#,
            Path::new("p.toml"),
            "p",
        )
        .unwrap();
        let cfg = SweepConfig {
            workloads: 2,
            seed: 1,
            heuristics: s.heuristics.clone(),
            threads: Some(1),
            stop_at_window_end: false,
            bounds: crate::fluid::TurnBounds::NONE,
        };
        let res = run_sweep(&s, &cfg, &|| {}).unwrap();
        let dir = std::env::temp_dir().join(format!("iosets-fluid-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = save_all(&dir, &res).unwrap();
        assert_eq!(files.len(), 4);
        for (f, m) in files.iter().zip(METRIC_NAMES) {
            assert!(f.ends_with(format!("plot-test-{m}.svg")));
            let svg = std::fs::read_to_string(f).unwrap();
            assert!(svg.starts_with("<svg") || svg.contains("<svg"));
            assert!(svg.contains("fair-share") && svg.contains("set-10"), "{m}");
            assert!(svg.contains(metric_label(m).split(' ').next().unwrap()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
