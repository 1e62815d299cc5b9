//! One `sim run`: a scenario (at a value of its swept variable) or a saved workload, run once
//! under each heuristic. Front ends (`iosets sim run`, the Python bindings' `simulate`) choose
//! the inputs and print; the choice of workload, seed and heuristics is made here, once.

use serde::Serialize;

use super::report::RunReport;
use super::scenario::Scenario;
use super::sweep::workload_seed;
use super::{
    simulate, ExclusiveBound, FluidError, Heuristic, RunResult, SimOptions, TurnBounds, Workload,
};

/// What to run.
#[derive(Clone, Debug)]
pub enum RunInput {
    /// A scenario, at `at` (the value of its swept variable; required for a sweep file).
    Scenario {
        /// The scenario (boxed: it is much larger than a workload's handle).
        scenario: Box<Scenario>,
        /// The swept variable's value.
        at: Option<f64>,
    },
    /// A workload (as written in a `sim run --json` report), named for the output.
    Workload {
        /// Its name (e.g. the file's stem).
        name: String,
        /// The workload.
        workload: Workload,
    },
}

/// A finished `sim run`.
#[derive(Clone, Debug)]
pub struct ScenarioRun {
    /// The scenario's or workload's name.
    pub name: String,
    /// The swept variable and the value run at, for a sweep file.
    pub at: Option<(String, f64)>,
    /// The seed given (the workload is workload 0 of a sweep with this seed).
    pub seed: u64,
    /// Whether the workload was drawn at random.
    pub random: bool,
    /// The workload.
    pub workload: Workload,
    /// One result per heuristic, in order.
    pub runs: Vec<RunResult>,
    /// The bounds on a turn the runs had ([`TurnBounds::NONE`]: the paper's rule).
    pub bounds: TurnBounds,
}

/// Runs `input` under `heuristics` (empty: the scenario's list, or the paper's six for a
/// workload), with `bounds` on a turn. The workload is drawn with [`workload_seed`]`(seed, 0)`,
/// as workload 0 of a sweep seeded `seed`; `phases` records every phase of every job.
pub fn run_input(
    input: RunInput,
    heuristics: &[Heuristic],
    seed: u64,
    phases: bool,
    bounds: TurnBounds,
) -> Result<ScenarioRun, FluidError> {
    let draw = workload_seed(seed, 0);
    let (name, at, hs, workload, random) = match input {
        RunInput::Workload { name, workload } => {
            let hs = if heuristics.is_empty() {
                Heuristic::PAPER.to_vec()
            } else {
                heuristics.to_vec()
            };
            (name, None, hs, workload, false)
        }
        RunInput::Scenario { scenario, at } => {
            let hs = if heuristics.is_empty() {
                scenario.heuristics.clone()
            } else {
                heuristics.to_vec()
            };
            let source = scenario.at(at)?;
            let w = source.workload(draw)?;
            let at = scenario.sweep.map(|s| s.variable).zip(at);
            (scenario.name, at, hs, w, source.is_random())
        }
    };
    if hs.is_empty() {
        return Err(FluidError::invalid(
            "heuristics",
            "[]",
            "expected at least one heuristic",
        ));
    }
    let options = SimOptions {
        seed: draw,
        record: phases,
        stop_at_window_end: false,
        bounds,
    };
    let runs = hs
        .iter()
        .map(|&h| simulate(&workload, h, options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ScenarioRun {
        name,
        at,
        seed,
        random,
        workload,
        runs,
        bounds,
    })
}

impl ScenarioRun {
    /// The line that introduces the run: name, value, jobs, iterations, bandwidth, window, seed;
    /// and under bounds on a turn, a second line saying which.
    pub fn headline(&self) -> String {
        let window = self.runs[0].window;
        let line = format!(
            "scenario {}{}: {} jobs, {} iterations, B = {}, window [{}, {}] s{}",
            self.name,
            self.at
                .as_ref()
                .map_or_else(String::new, |(v, x)| format!(" at {v} = {x}")),
            self.workload.jobs.len(),
            self.workload.iterations(),
            self.workload.bandwidth,
            window.begin,
            window.end,
            if self.random {
                format!(", drawn with seed {}", self.seed)
            } else {
                String::new()
            }
        );
        match bounds_line(self.bounds) {
            Some(b) => format!("{line}\n{b}"),
            None => line,
        }
    }

    /// The run as a [`RunReport`] (JSON: the workload and every result).
    pub fn report(&self) -> RunReport<'_> {
        RunReport {
            scenario: &self.name,
            at: self.at.as_ref().map(|(v, x)| (v.as_str(), *x)),
            seed: self.seed,
            workload: &self.workload,
            bounds: BoundsReport::of(self.bounds),
            runs: &self.runs,
        }
    }
}

/// The line that says which bounds on a turn runs had (`None` for the paper's rule).
pub fn bounds_line(bounds: TurnBounds) -> Option<String> {
    if bounds == TurnBounds::NONE {
        return None;
    }
    let exclusive = match bounds.max_exclusive {
        ExclusiveBound::Off => "none".to_string(),
        ExclusiveBound::Auto => "1 s / the set's priority, 1-60 s".to_string(),
        ExclusiveBound::Fixed(b) => format!("{} s", b.as_secs_f64()),
    };
    let hold = bounds
        .unknown_hold
        .map_or("none".to_string(), |h| format!("{} s", h.as_secs_f64()));
    Some(format!(
        "bounds on a turn, as the servers': max_exclusive {exclusive}; the new set's \
         unknown_hold {hold}"
    ))
}

/// The bounds on a turn runs had, as the JSON reports write them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BoundsReport {
    /// `off`, `auto` (1 s / the set's priority, from 1 s to 60 s) or `fixed`.
    pub max_exclusive: &'static str,
    /// The fixed bound, in seconds (with `fixed`).
    pub max_exclusive_s: Option<f64>,
    /// The new set's bound, in seconds (`None`: none).
    pub unknown_hold_s: Option<f64>,
}

impl BoundsReport {
    /// The report of `bounds`; `None` for [`TurnBounds::NONE`], the paper's rule.
    pub fn of(bounds: TurnBounds) -> Option<BoundsReport> {
        if bounds == TurnBounds::NONE {
            return None;
        }
        let (max_exclusive, max_exclusive_s) = match bounds.max_exclusive {
            ExclusiveBound::Off => ("off", None),
            ExclusiveBound::Auto => ("auto", None),
            ExclusiveBound::Fixed(b) => ("fixed", Some(b.as_secs_f64())),
        };
        Some(BoundsReport {
            max_exclusive,
            max_exclusive_s,
            unknown_hold_s: bounds.unknown_hold.map(|h| h.as_secs_f64()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const HAND: &str = r#"
        name = "hand"
        heuristics = ["fair-share", "exclusive-fcfs"]
        [platform]
        bandwidth = 1.0
        [[group]]
        name = "a"
        t_cpu = 1.0
        t_io = 4.0
        iterations = 1
        [[group]]
        name = "b"
        t_cpu = 2.0
        t_io = 2.0
        iterations = 1
    "#;

    fn hand() -> Scenario {
        Scenario::parse(HAND, Path::new("hand.toml"), "hand").unwrap()
    }

    #[test]
    fn a_scenario_runs_under_its_heuristics_or_the_ones_given() {
        let input = RunInput::Scenario {
            scenario: Box::new(hand()),
            at: None,
        };
        let done = run_input(input, &[], 1, false, TurnBounds::NONE).unwrap();
        let names: Vec<String> = done.runs.iter().map(|r| r.heuristic.to_string()).collect();
        assert_eq!(names, ["fair-share", "exclusive-fcfs"]);
        // Fair share: b done at 6, a at 7 (a alone in [1, 2], then both at 1/2).
        let done_at: Vec<Option<f64>> = done.runs[0].jobs.iter().map(|j| j.completion).collect();
        assert_eq!(done_at, [Some(7.0), Some(6.0)]);
        assert!(done.at.is_none() && !done.random);
        assert!(
            done.headline().starts_with("scenario hand: 2 jobs"),
            "{}",
            done.headline()
        );
        let only = run_input(
            RunInput::Scenario {
                scenario: Box::new(hand()),
                at: None,
            },
            &[Heuristic::SET10],
            1,
            false,
            TurnBounds::NONE,
        )
        .unwrap();
        assert_eq!(only.runs.len(), 1);
    }

    #[test]
    fn a_workload_runs_under_the_papers_six_by_default() {
        let w = hand().at(None).unwrap().workload(1).unwrap();
        let input = RunInput::Workload {
            name: "w".into(),
            workload: w,
        };
        let done = run_input(input, &[], 1, false, TurnBounds::NONE).unwrap();
        assert_eq!(done.runs.len(), Heuristic::PAPER.len());
        let v = serde_json::to_value(done.report()).unwrap();
        assert_eq!(v["scenario"], "w");
    }
}
