//! What every figure of the lab shares: one palette (matplotlib's tab20, whose first colours
//! are the ones people know from their own plots), one legend row, the category axis and the
//! error conversion. The figures themselves are with their experiments.

use anyhow::{anyhow, Result};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Red: the high-frequency job of seed 004, the setting without a quota of seed 003.
pub(crate) const RED: RGBColor = RGBColor(214, 39, 40);
/// Blue: the first colour of the palette; seed 003's setting with a quota.
pub(crate) const BLUE: RGBColor = RGBColor(31, 119, 180);
/// Grey: references (seed 003's job alone).
pub(crate) const GREY: RGBColor = RGBColor(127, 127, 127);

/// tab20 without its reds, so that eighteen series stay apart beside [`RED`].
const PALETTE: [RGBColor; 18] = [
    BLUE,
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    GREY,
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
    RGBColor(197, 176, 213),
    RGBColor(196, 156, 148),
    RGBColor(247, 182, 210),
    RGBColor(199, 199, 199),
    RGBColor(219, 219, 141),
    RGBColor(158, 218, 229),
];

/// A colour per job: job 1 (seed 004's high-frequency job) [`RED`], the others from the
/// palette in turn, so that fifteen low-frequency jobs stay apart.
pub(crate) fn job_colour(job: u64) -> RGBColor {
    if job == 1 {
        return RED;
    }
    PALETTE[(job as usize).wrapping_sub(2) % PALETTE.len()]
}

/// A drawing error as an `anyhow` error.
pub(crate) fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("{e}")
}

/// The label of category axis position `x`: the name at a whole index, nothing between.
pub(crate) fn category_label(names: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// Draws `chart`'s grid for a category x axis of `names` (a name under each whole position, no
/// vertical lines); `y` adds what the y axis needs (its description, its labels).
pub(crate) fn draw_category_mesh<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    names: &[String],
    y: impl FnOnce(&mut MeshStyle<'_, '_, RangedCoordf64, Y, DB>),
) -> Result<()>
where
    DB: DrawingBackend,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    let x_label = |x: &f64| category_label(names, *x);
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(names.len().max(1))
        .x_label_formatter(&x_label)
        .label_style(("sans-serif", 13))
        .light_line_style(RGBColor(235, 235, 235));
    y(&mut mesh);
    mesh.draw().map_err(err)
}

/// A legend in one row: for each entry a square of its colour and its name `text_dx` pixels to
/// its right, the first at `x0`, the next `step` pixels further, in a font of `size` (the square
/// is as high as the text).
pub(crate) fn legend_row(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[(RGBColor, String)],
    (x0, step): (i32, i32),
    size: i32,
    text_dx: i32,
) -> Result<()> {
    for (i, (colour, name)) in entries.iter().enumerate() {
        let x = x0 + i as i32 * step;
        area.draw(&Rectangle::new(
            [(x, 8), (x + size, 8 + size)],
            colour.filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            name.as_str(),
            (x + text_dx, 8),
            ("sans-serif", size),
        ))
        .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_get_distinct_colours_and_job_one_is_red() {
        assert_eq!(job_colour(1), RED);
        let colours: Vec<RGBColor> = (1..=19).map(job_colour).collect();
        for (i, a) in colours.iter().enumerate() {
            for b in &colours[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn category_labels_only_at_whole_positions() {
        let names = vec!["a".to_string(), "b".to_string()];
        assert_eq!(category_label(&names, 1.0), "b");
        assert_eq!(category_label(&names, 0.5), "");
        assert_eq!(category_label(&names, 7.0), "");
        assert_eq!(category_label(&names, -1.0), "");
    }
}
