//! The soak suite's results: one [`Row`] per scenario (its parameters, what it measured, and its
//! verdict against the goal), printed as a table and written as CSV.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

/// A scenario's verdict.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Every criterion of its goal held.
    Pass,
    /// The first criterion that did not hold (or the error that stopped it).
    Fail(String),
    /// Not run here, and why (e.g. not root for the tmpfs).
    Skip(String),
}

impl Verdict {
    /// `PASS`, `FAIL`, `SKIP`.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail(_) => "FAIL",
            Verdict::Skip(_) => "SKIP",
        }
    }

    /// Why it failed or was skipped.
    pub(crate) fn reason(&self) -> &str {
        match self {
            Verdict::Pass => "",
            Verdict::Fail(r) | Verdict::Skip(r) => r,
        }
    }
}

/// One scenario's line.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// The scenario (`kill9`, `idle`, ...).
    pub(crate) scenario: String,
    /// Its parameters, in order.
    pub(crate) params: Vec<(String, String)>,
    /// What it measured, in order.
    pub(crate) figures: Vec<(String, String)>,
    /// Against the goal.
    pub(crate) verdict: Verdict,
    /// How long it took, s.
    pub(crate) seconds: f64,
}

impl Row {
    /// A row for `scenario` with nothing measured yet (a pass until a check fails).
    pub(crate) fn new(scenario: &str) -> Row {
        Row {
            scenario: scenario.into(),
            params: Vec::new(),
            figures: Vec::new(),
            verdict: Verdict::Pass,
            seconds: 0.0,
        }
    }

    /// Adds a parameter.
    pub(crate) fn param(&mut self, key: &str, value: impl ToString) {
        self.params.push((key.into(), value.to_string()));
    }

    /// Adds a measured figure.
    pub(crate) fn figure(&mut self, key: &str, value: impl ToString) {
        self.figures.push((key.into(), value.to_string()));
    }

    /// Records a criterion of the goal: the first that does not hold makes the row fail.
    pub(crate) fn check(&mut self, holds: bool, what: impl FnOnce() -> String) {
        if !holds && self.verdict == Verdict::Pass {
            self.verdict = Verdict::Fail(what());
        }
    }
}

/// `k=v k=v`.
fn pairs(p: &[(String, String)]) -> String {
    p.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The summary table: a line per scenario, its parameters, figures, and the reason of a FAIL
/// or SKIP on the line below.
pub(crate) fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let w = rows
        .iter()
        .map(|r| r.scenario.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let _ = writeln!(
        out,
        "{:<w$}  {:<6} {:>8}  parameters / figures",
        "scenario", "result", "time"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<w$}  {:<6} {:>6.1} s  {}",
            r.scenario,
            r.verdict.word(),
            r.seconds,
            pairs(&r.params)
        );
        if !r.figures.is_empty() {
            let _ = writeln!(
                out,
                "{:<w$}  {:<6} {:>8}  {}",
                "",
                "",
                "",
                pairs(&r.figures)
            );
        }
        if !r.verdict.reason().is_empty() {
            let _ = writeln!(
                out,
                "{:<w$}  {:<6} {:>8}  {}: {}",
                "",
                "",
                "",
                r.verdict.word().to_lowercase(),
                r.verdict.reason()
            );
        }
    }
    let fails = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Fail(_)));
    let _ = writeln!(
        out,
        "{} scenarios: {} passed, {} failed, {} skipped",
        rows.len(),
        rows.iter().filter(|r| r.verdict == Verdict::Pass).count(),
        fails.count(),
        rows.iter()
            .filter(|r| matches!(r.verdict, Verdict::Skip(_)))
            .count()
    );
    out
}

/// A CSV field, quoted when it must be.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Every row's parameters and figures, one per line:
/// `scenario,result,seconds,kind,key,value` (kind `param`, `figure` or `reason`).
pub(crate) fn csv(rows: &[Row]) -> String {
    let mut out = String::from("scenario,result,seconds,kind,key,value\n");
    for r in rows {
        let mut line = |kind: &str, k: &str, v: &str| {
            let _ = writeln!(
                out,
                "{},{},{:.3},{kind},{},{}",
                field(&r.scenario),
                r.verdict.word(),
                r.seconds,
                field(k),
                field(v)
            );
        };
        for (k, v) in &r.params {
            line("param", k, v);
        }
        for (k, v) in &r.figures {
            line("figure", k, v);
        }
        if !r.verdict.reason().is_empty() {
            line("reason", "reason", r.verdict.reason());
        }
    }
    out
}

/// Writes `soak.csv` and `summary.txt` into `dir`.
pub(crate) fn save(dir: &Path, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, text) in [("soak.csv", csv(rows)), ("summary.txt", table(rows))] {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failed_check_is_the_reason() {
        let mut r = Row::new("x");
        r.check(true, || "never".into());
        r.check(false, || "lost=3".into());
        r.check(false, || "later".into());
        assert_eq!(r.verdict, Verdict::Fail("lost=3".into()));
    }

    #[test]
    fn csv_has_a_line_per_value_and_quotes_commas() {
        let mut r = Row::new("kill9");
        r.param("writers", 8);
        r.figure("note", "a,b");
        r.check(false, || "bad".into());
        let text = csv(&[r]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1], "kill9,FAIL,0.000,param,writers,8");
        assert_eq!(lines[2], "kill9,FAIL,0.000,figure,note,\"a,b\"");
        assert!(table(&[Row::new("idle")]).contains("1 scenarios: 1 passed, 0 failed"));
    }
}
