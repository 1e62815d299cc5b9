//! Scenario files: a platform and its jobs in TOML, optionally sweeping one variable.
//!
//! ```toml
//! name = "seed004"                      # optional: names the outputs
//! description = "..."                   # optional
//! heuristics = ["fair-share", "set-10"] # optional: default the paper's six
//!
//! [platform]
//! bandwidth = 1.0          # B, volume per second (> 0)
//! horizon = 20000          # h, seconds: iterations = round(h / w) when not given
//! window = [6000, 14000]   # [T_begin, T_end]; default: the whole run
//!
//! # Either explicit groups of identical jobs ...
//! [[group]]
//! name = "high"
//! count = 1                # default 1
//! t_cpu = 18.0             # with t_io or volume; or w_iter with alpha, t_io or volume
//! t_io = 1.2
//! iterations = 200         # default round(horizon / w_iter)
//! release = 0.0            # default 0
//! class_w_iter = 19.2      # what CLAIRVOYANT sees; default the group's w_iter
//!
//! # ... or the paper's generator (see `generator`):
//! [generator]
//! omega = 0.8              # Σ α, in (0, 1)
//! noise = 0.1              # b: per-phase factor 1 + U[-b, b]; default 0
//! [[generator.group]]
//! name = "H"
//! count = "nH"             # numbers may be expressions of the swept variable
//! mean = 10
//! sd = 1
//!
//! [sweep]                  # optional
//! variable = "nH"
//! values = [0, 10, 20]     # or from = 0, to = 40, step = 1 (inclusive)
//! ```
//!
//! Every table rejects unknown keys (a misspelt key is an error naming it, never silently
//! ignored). Any number may be written as a string holding an arithmetic expression (`+ - * / ( )`,
//! numbers and the swept variable's name), evaluated at each value of the sweep: `"40 - nH"`,
//! `"0.1 * eta * 1000"`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::generator::{GroupSpec, PaperGenerator};
use super::model::{Job, Window, Workload};
use super::{FluidError, Heuristic};

/// A number or an expression of the swept variable.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
enum Num {
    Number(f64),
    Expr(String),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileScenario {
    name: Option<String>,
    description: Option<String>,
    heuristics: Option<Vec<String>>,
    platform: FilePlatform,
    #[serde(default)]
    group: Vec<FileGroup>,
    generator: Option<FileGenerator>,
    sweep: Option<FileSweep>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePlatform {
    bandwidth: Num,
    horizon: Option<Num>,
    window: Option<[Num; 2]>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    name: Option<String>,
    count: Option<Num>,
    w_iter: Option<Num>,
    alpha: Option<Num>,
    t_cpu: Option<Num>,
    t_io: Option<Num>,
    volume: Option<Num>,
    iterations: Option<Num>,
    release: Option<Num>,
    class_w_iter: Option<Num>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGenerator {
    omega: Num,
    noise: Option<Num>,
    #[serde(default)]
    group: Vec<FileGenGroup>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGenGroup {
    name: Option<String>,
    count: Num,
    mean: Num,
    sd: Num,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSweep {
    variable: String,
    values: Option<Vec<f64>>,
    from: Option<f64>,
    to: Option<f64>,
    step: Option<f64>,
}

/// The swept variable and its values.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepAxis {
    /// Its name, as used in expressions and on plots.
    pub variable: String,
    /// Its values, in order.
    pub values: Vec<f64>,
}

/// A scenario file, parsed and checked at every value of its sweep.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name (the file's `name`, else the file stem).
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// The heuristics to compare (default: the paper's six).
    pub heuristics: Vec<Heuristic>,
    /// The swept variable, if any.
    pub sweep: Option<SweepAxis>,
    file: FileScenario,
}

/// What a scenario gives at one value of its sweep: a fixed workload, or a generator to draw
/// workloads from.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSource {
    /// Explicit groups: the same workload for every seed.
    Fixed(Workload),
    /// The paper's generator: one workload per seed.
    Generated(PaperGenerator),
}

impl WorkloadSource {
    /// The workload for `seed` (ignored by a fixed workload).
    pub fn workload(&self, seed: u64) -> Result<Workload, FluidError> {
        match self {
            WorkloadSource::Fixed(w) => Ok(w.clone()),
            WorkloadSource::Generated(g) => g.generate(seed),
        }
    }

    /// Whether different seeds give different workloads.
    pub fn is_random(&self) -> bool {
        matches!(self, WorkloadSource::Generated(_))
    }
}

/// Evaluates expressions of one variable.
struct Eval<'a> {
    var: Option<(&'a str, f64)>,
}

impl Eval<'_> {
    fn num(&self, field: &str, n: &Num) -> Result<f64, FluidError> {
        match n {
            Num::Number(x) => Ok(*x),
            Num::Expr(text) => {
                let err = |problem: String| FluidError::Expression {
                    field: field.to_string(),
                    text: text.clone(),
                    problem,
                };
                let tokens = tokenize(text).map_err(err)?;
                let mut p = Parser {
                    tokens: &tokens,
                    pos: 0,
                    var: self.var,
                };
                let v = p.expr().map_err(err)?;
                if p.pos != tokens.len() {
                    return Err(err(format!("unexpected {:?}", tokens[p.pos])));
                }
                Ok(v)
            }
        }
    }

    fn opt(&self, field: &str, n: &Option<Num>) -> Result<Option<f64>, FluidError> {
        n.as_ref().map(|n| self.num(field, n)).transpose()
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Num(f64),
    Ident(String),
    Op(char),
}

fn tokenize(s: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/()".contains(c) {
            out.push(Token::Op(c));
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < cs.len()
                && (cs[i].is_ascii_digit()
                    || cs[i] == '.'
                    || cs[i] == 'e'
                    || cs[i] == 'E'
                    || ((cs[i] == '-' || cs[i] == '+') && matches!(cs[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let t: String = cs[start..i].iter().collect();
            out.push(Token::Num(
                t.parse().map_err(|_| format!("{t:?} is not a number"))?,
            ));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(cs[start..i].iter().collect()));
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    if out.is_empty() {
        return Err("empty expression".to_string());
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    var: Option<(&'a str, f64)>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut v = self.term()?;
        while let Some(Token::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.term()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.factor()?;
        while let Some(Token::Op(op @ ('*' | '/'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.factor()?;
            v = if op == '*' { v * r } else { v / r };
        }
        Ok(v)
    }

    fn factor(&mut self) -> Result<f64, String> {
        let t = self.peek().cloned();
        self.pos += 1;
        match t {
            Some(Token::Num(x)) => Ok(x),
            Some(Token::Op('-')) => Ok(-self.factor()?),
            Some(Token::Op('(')) => {
                let v = self.expr()?;
                if self.peek() != Some(&Token::Op(')')) {
                    return Err("missing ')'".to_string());
                }
                self.pos += 1;
                Ok(v)
            }
            Some(Token::Ident(name)) => match self.var {
                Some((var, x)) if var == name => Ok(x),
                Some((var, _)) => Err(format!(
                    "unknown name {name:?}: the swept variable is {var:?}"
                )),
                None => Err(format!(
                    "unknown name {name:?}: the scenario has no [sweep] variable"
                )),
            },
            Some(t) => Err(format!("unexpected {t:?}")),
            None => Err("unexpected end".to_string()),
        }
    }
}

fn positive(field: &str, x: f64) -> Result<f64, FluidError> {
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(FluidError::invalid(
            field,
            x,
            "expected a finite number > 0",
        ))
    }
}

fn non_negative(field: &str, x: f64) -> Result<f64, FluidError> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(FluidError::invalid(
            field,
            x,
            "expected a finite number ≥ 0",
        ))
    }
}

fn count(field: &str, x: f64) -> Result<usize, FluidError> {
    if x.is_finite() && x >= 0.0 && x == x.round() && x < 1e9 {
        Ok(x as usize)
    } else {
        Err(FluidError::invalid(field, x, "expected a whole number ≥ 0"))
    }
}

impl Scenario {
    /// Reads and checks the scenario file at `path`.
    pub fn load(path: &Path) -> Result<Scenario, FluidError> {
        let text = std::fs::read_to_string(path).map_err(|error| FluidError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let stem = path.file_stem().map_or_else(
            || "scenario".to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        Scenario::parse(&text, path, &stem)
    }

    /// Parses and checks scenario `text`; `path` names it in errors, `default_name` names it when
    /// the file has no `name`.
    pub fn parse(text: &str, path: &Path, default_name: &str) -> Result<Scenario, FluidError> {
        let file: FileScenario = toml::from_str(text).map_err(|e| FluidError::Parse {
            path: PathBuf::from(path),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        let heuristics = match &file.heuristics {
            None => Heuristic::PAPER.to_vec(),
            Some(names) if names.is_empty() => {
                return Err(FluidError::invalid(
                    "heuristics",
                    "[]",
                    "expected at least one heuristic",
                ))
            }
            Some(names) => names
                .iter()
                .map(|n| n.parse())
                .collect::<Result<Vec<Heuristic>, _>>()?,
        };
        let sweep = file.sweep.as_ref().map(sweep_axis).transpose()?;
        let scenario = Scenario {
            name: file
                .name
                .clone()
                .unwrap_or_else(|| default_name.to_string()),
            description: file.description.clone(),
            heuristics,
            sweep,
            file,
        };
        // Check every point now, so that a sweep never fails half-way.
        match &scenario.sweep {
            None => {
                scenario.at(None)?;
            }
            Some(axis) => {
                for &x in &axis.values {
                    scenario.at(Some(x)).map_err(|e| match e {
                        FluidError::NoJobs { context } => FluidError::NoJobs {
                            context: format!("{context} at {} = {x}", axis.variable),
                        },
                        FluidError::Invalid {
                            field,
                            value,
                            expected,
                        } => FluidError::Invalid {
                            field: format!("{field} (at {} = {x})", axis.variable),
                            value,
                            expected,
                        },
                        other => other,
                    })?;
                }
            }
        }
        Ok(scenario)
    }

    /// The workload source at `value` of the swept variable (`None` for a scenario without sweep).
    pub fn at(&self, value: Option<f64>) -> Result<WorkloadSource, FluidError> {
        let var = match (&self.sweep, value) {
            (None, None) => None,
            (Some(axis), Some(x)) => Some((axis.variable.as_str(), x)),
            (Some(axis), None) => {
                return Err(FluidError::Sweep(format!(
                    "scenario {} sweeps {:?}: give a value for it (e.g. --at {})",
                    self.name,
                    axis.variable,
                    axis.values.first().copied().unwrap_or(0.0)
                )))
            }
            (None, Some(x)) => {
                return Err(FluidError::Sweep(format!(
                    "scenario {} has no [sweep] variable to set to {x}",
                    self.name
                )))
            }
        };
        let ev = Eval { var };
        let f = &self.file;
        let bandwidth = positive(
            "platform.bandwidth",
            ev.num("platform.bandwidth", &f.platform.bandwidth)?,
        )?;
        let horizon = ev
            .opt("platform.horizon", &f.platform.horizon)?
            .map(|h| positive("platform.horizon", h))
            .transpose()?;
        let window = match &f.platform.window {
            None => None,
            Some([a, b]) => Some(Window::new(
                ev.num("platform.window", a)?,
                ev.num("platform.window", b)?,
            )?),
        };
        match (&f.generator, f.group.is_empty()) {
            (Some(_), false) => Err(FluidError::invalid(
                "group",
                format!("{} [[group]] tables", f.group.len()),
                "expected either [[group]] tables or a [generator], not both",
            )),
            (None, true) => Err(FluidError::NoJobs {
                context: "the scenario has neither [[group]] tables nor a [generator]".to_string(),
            }),
            (Some(g), true) => {
                let horizon = horizon.ok_or_else(|| {
                    FluidError::invalid(
                        "platform.horizon",
                        "(missing)",
                        "the generator needs a horizon",
                    )
                })?;
                let mut groups = Vec::new();
                for (i, gg) in g.group.iter().enumerate() {
                    let field = |k: &str| format!("generator.group[{i}].{k}");
                    groups.push(GroupSpec {
                        name: gg.name.clone().unwrap_or_else(|| format!("group {i}")),
                        count: count(&field("count"), ev.num(&field("count"), &gg.count)?)?,
                        mean: ev.num(&field("mean"), &gg.mean)?,
                        sd: ev.num(&field("sd"), &gg.sd)?,
                    });
                }
                if groups.is_empty() {
                    return Err(FluidError::NoJobs {
                        context: "[generator] has no [[generator.group]]".to_string(),
                    });
                }
                let gen = PaperGenerator {
                    bandwidth,
                    horizon,
                    omega: ev.num("generator.omega", &g.omega)?,
                    noise: ev.opt("generator.noise", &g.noise)?.unwrap_or(0.0),
                    window,
                    groups,
                };
                gen.validate()?;
                Ok(WorkloadSource::Generated(gen))
            }
            (None, false) => {
                let mut jobs = Vec::new();
                let mut names = Vec::new();
                for (i, g) in f.group.iter().enumerate() {
                    let (n, job) = explicit_group(&ev, i, g, bandwidth, horizon)?;
                    names.push(g.name.clone().unwrap_or_else(|| format!("group {i}")));
                    jobs.extend(std::iter::repeat_n(job, n));
                }
                if jobs.is_empty() {
                    return Err(FluidError::NoJobs {
                        context: "every [[group]] has count 0".to_string(),
                    });
                }
                let w = Workload {
                    bandwidth,
                    window,
                    jobs,
                    groups: names,
                };
                w.validate()?;
                Ok(WorkloadSource::Fixed(w))
            }
        }
    }
}

fn sweep_axis(s: &FileSweep) -> Result<SweepAxis, FluidError> {
    let values = match (&s.values, s.from, s.to, s.step) {
        (Some(v), None, None, None) => v.clone(),
        (None, Some(from), Some(to), Some(step)) => {
            if !(step.is_finite() && step > 0.0 && from.is_finite() && to.is_finite() && to >= from)
            {
                return Err(FluidError::invalid(
                    "sweep",
                    format!("from = {from}, to = {to}, step = {step}"),
                    "expected from ≤ to and step > 0",
                ));
            }
            let n = ((to - from) / step + 1e-9).floor() as usize + 1;
            (0..n).map(|i| from + i as f64 * step).collect()
        }
        _ => {
            return Err(FluidError::invalid(
                "sweep",
                "(values / from, to, step)",
                "expected either values = [...] or all of from, to and step",
            ))
        }
    };
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return Err(FluidError::invalid(
            "sweep.values",
            format!("{values:?}"),
            "expected at least one finite value",
        ));
    }
    let v = &s.variable;
    if v.is_empty()
        || !v.chars().all(|c| c.is_alphanumeric() || c == '_')
        || v.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(FluidError::invalid(
            "sweep.variable",
            format!("{v:?}"),
            "expected a name of letters, digits and _",
        ));
    }
    Ok(SweepAxis {
        variable: v.clone(),
        values,
    })
}

/// One explicit group: how many jobs, and the job they all are.
fn explicit_group(
    ev: &Eval<'_>,
    i: usize,
    g: &FileGroup,
    bandwidth: f64,
    horizon: Option<f64>,
) -> Result<(usize, Job), FluidError> {
    let field = |k: &str| format!("group[{i}].{k}");
    let get = |k: &str, n: &Option<Num>| ev.opt(&field(k), n);
    let n = match get("count", &g.count)? {
        Some(c) => count(&field("count"), c)?,
        None => 1,
    };
    let w_iter = get("w_iter", &g.w_iter)?
        .map(|w| positive(&field("w_iter"), w))
        .transpose()?;
    let alpha = get("alpha", &g.alpha)?;
    let t_cpu = get("t_cpu", &g.t_cpu)?
        .map(|x| non_negative(&field("t_cpu"), x))
        .transpose()?;
    let t_io = get("t_io", &g.t_io)?
        .map(|x| non_negative(&field("t_io"), x))
        .transpose()?;
    let volume = get("volume", &g.volume)?
        .map(|x| non_negative(&field("volume"), x))
        .transpose()?;
    let shape =
        "give t_cpu with one of t_io or volume, or w_iter with one of alpha, t_io or volume";
    let io_given = [t_io.is_some(), volume.is_some(), alpha.is_some()]
        .iter()
        .filter(|&&b| b)
        .count();
    if io_given != 1 || t_cpu.is_some() == w_iter.is_some() || (t_cpu.is_some() && alpha.is_some())
    {
        return Err(FluidError::invalid(
            format!("group[{i}]"),
            "(phase lengths)",
            shape,
        ));
    }
    let t_io = match (t_io, volume, alpha) {
        (Some(t), _, _) => t,
        (_, Some(v), _) => v / bandwidth,
        (_, _, Some(a)) => {
            if !(0.0..=1.0).contains(&a) {
                return Err(FluidError::invalid(
                    field("alpha"),
                    a,
                    "expected a fraction in [0, 1]",
                ));
            }
            a * w_iter.unwrap_or(0.0)
        }
        _ => unreachable!("exactly one I/O length is given"),
    };
    let t_cpu = match (t_cpu, w_iter) {
        (Some(c), _) => c,
        (None, Some(w)) => {
            if t_io > w {
                return Err(FluidError::invalid(
                    field("w_iter"),
                    w,
                    format!("expected at least t_io = {t_io}"),
                ));
            }
            w - t_io
        }
        (None, None) => unreachable!("t_cpu or w_iter is given"),
    };
    let w = t_cpu + t_io;
    if w <= 0.0 {
        return Err(FluidError::invalid(
            format!("group[{i}]"),
            "t_cpu + t_io = 0",
            "expected an iteration longer than 0",
        ));
    }
    let iterations = match get("iterations", &g.iterations)? {
        Some(it) => count(&field("iterations"), it)?,
        None => match horizon {
            Some(h) => ((h / w).round() as usize).max(1),
            None => {
                return Err(FluidError::invalid(
                    field("iterations"),
                    "(missing)",
                    "give iterations, or platform.horizon to derive them",
                ))
            }
        },
    };
    if iterations == 0 {
        return Err(FluidError::invalid(
            field("iterations"),
            0,
            "expected at least 1",
        ));
    }
    let release = non_negative(
        &field("release"),
        get("release", &g.release)?.unwrap_or(0.0),
    )?;
    let class_w_iter = positive(
        &field("class_w_iter"),
        get("class_w_iter", &g.class_w_iter)?.unwrap_or(w),
    )?;
    Ok((
        n,
        Job {
            group: i,
            release,
            cpu: vec![t_cpu; iterations],
            volume: vec![t_io * bandwidth; iterations],
            class_w_iter,
            peak: None,
            weight: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, FluidError> {
        Scenario::parse(text, Path::new("test.toml"), "test")
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    const SEED004: &str = r#"
        name = "seed004"
        [platform]
        bandwidth = 1.0
        window = [400, 3200]
        [[group]]
        name = "high"
        t_cpu = 18
        t_io = 1.2
        iterations = 200
        [[group]]
        name = "low"
        count = 15
        t_cpu = 360
        volume = 24
        iterations = 10
    "#;

    #[test]
    fn explicit_groups_make_identical_jobs() {
        let s = parse(SEED004).unwrap();
        assert_eq!(s.name, "seed004");
        assert_eq!(s.heuristics, Heuristic::PAPER.to_vec());
        let WorkloadSource::Fixed(w) = s.at(None).unwrap() else {
            panic!("fixed")
        };
        assert_eq!(w.jobs.len(), 16);
        assert_eq!(w.jobs[0].cpu, vec![18.0; 200]);
        assert_eq!(w.jobs[0].volume, vec![1.2; 200]);
        assert!((w.jobs[0].class_w_iter - 19.2).abs() < 1e-12);
        assert_eq!(w.jobs[15].volume, vec![24.0; 10]);
        assert_eq!(w.jobs[15].group, 1);
        assert_eq!(w.window, Some(Window::new(400.0, 3200.0).unwrap()));
        assert_eq!(w.groups, vec!["high", "low"]);
    }

    #[test]
    fn w_iter_and_alpha_with_a_horizon() {
        let s = parse(
            r#"
            [platform]
            bandwidth = 2.0
            horizon = 6400
            [[group]]
            w_iter = 64
            alpha = 0.0625
        "#,
        )
        .unwrap();
        let w = s.at(None).unwrap().workload(0).unwrap();
        assert_eq!(w.jobs[0].cpu.len(), 100);
        assert_eq!(w.jobs[0].cpu[0], 60.0);
        assert_eq!(w.jobs[0].volume[0], 8.0);
    }

    /// A sweep of `nH` from 0 to 4 over two generated groups: `nH` jobs of mean 10 and standard
    /// deviation `sd` (an expression), the others of mean 1000. `top` and `generator` are lines
    /// added before `[platform]` and to `[generator]`.
    fn nh_sweep(top: &str, generator: &str, sd: &str) -> String {
        format!(
            r#"
            {top}
            [platform]
            bandwidth = 1
            horizon = 2000
            [generator]
            omega = 0.8
            {generator}
            [[generator.group]]
            count = "nH"
            mean = 10
            sd = "{sd}"
            [[generator.group]]
            count = "4 - nH"
            mean = 1000
            sd = 0
            [sweep]
            variable = "nH"
            from = 0
            to = 4
            step = 2
        "#
        )
    }

    #[test]
    fn sweeps_evaluate_expressions_at_each_value() {
        let s = parse(&nh_sweep(
            r#"heuristics = ["set-10", "set-fairshare:online"]"#,
            r#"noise = "eta / 10""#,
            "(eta + 1) * 2",
        ));
        // eta is not the swept variable.
        let e = s.unwrap_err().to_string();
        assert!(
            e.contains("unknown name \"eta\"") && e.contains("\"nH\""),
            "{e}"
        );
        let s = parse(&nh_sweep("", "", "nH * 0.5")).unwrap();
        assert_eq!(s.sweep.as_ref().unwrap().values, vec![0.0, 2.0, 4.0]);
        let WorkloadSource::Generated(g) = s.at(Some(2.0)).unwrap() else {
            panic!("generated")
        };
        assert_eq!((g.groups[0].count, g.groups[1].count), (2, 2));
        assert_eq!(g.groups[0].sd, 1.0);
        assert!(s.at(None).unwrap_err().to_string().contains("--at"));
    }

    #[test]
    fn expressions() {
        let ev = Eval {
            var: Some(("x", 3.0)),
        };
        let e = |s: &str| ev.num("f", &Num::Expr(s.to_string()));
        assert_eq!(e("40 - x").unwrap(), 37.0);
        assert_eq!(e("-x * (2 + 1) / 3").unwrap(), -3.0);
        assert_eq!(e("1e2 * x").unwrap(), 300.0);
        assert!(e("x +").unwrap_err().to_string().contains("unexpected end"));
        assert!(e("(x").unwrap_err().to_string().contains("missing ')'"));
        assert!(e("x x").unwrap_err().to_string().contains("unexpected"));
        assert!(e("x % 2")
            .unwrap_err()
            .to_string()
            .contains("unexpected character"));
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err(&SEED004.replace("bandwidth = 1.0", "bandwith = 1.0"));
        assert!(e.contains("bandwith") && e.contains("test.toml"), "{e}");
        let e = err(&SEED004.replace("t_io = 1.2", "tio = 1.2"));
        assert!(e.contains("unknown field `tio`"), "{e}");
        let e = err(&format!("colour = \"red\"\n{SEED004}"));
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn negative_bandwidth_is_named() {
        let e = err(&SEED004.replace("bandwidth = 1.0", "bandwidth = -1.0"));
        assert!(e.contains("platform.bandwidth = -1"), "{e}");
        assert!(e.contains("> 0"), "{e}");
    }

    #[test]
    fn empty_job_lists_are_named() {
        let e = err("[platform]\nbandwidth = 1\n");
        assert!(e.contains("no jobs"), "{e}");
        let e = err(&SEED004
            .replace("count = 15", "count = 0")
            .replace("name = \"high\"", "name = \"high\"\ncount = 0"));
        assert!(e.contains("no jobs") && e.contains("count 0"), "{e}");
        let e = err(r#"
            [platform]
            bandwidth = 1
            horizon = 100
            [generator]
            omega = 0.5
            [[generator.group]]
            count = "4 - n"
            mean = 10
            sd = 1
            [sweep]
            variable = "n"
            values = [0, 4]
        "#);
        assert!(e.contains("no jobs") && e.contains("n = 4"), "{e}");
    }

    #[test]
    fn bad_shapes_and_values_are_named() {
        let e = err(&SEED004.replace("t_io = 1.2", "t_io = 1.2\nvolume = 3"));
        assert!(e.contains("group[0]") && e.contains("give t_cpu"), "{e}");
        let e = err(&SEED004.replace("iterations = 200", "iterations = 2.5"));
        assert!(e.contains("group[0].iterations = 2.5"), "{e}");
        let e = err(&SEED004.replace("[400, 3200]", "[400, 300]"));
        assert!(e.contains("platform.window"), "{e}");
        let e = err(&format!(
            "heuristics = [\"set-10\", \"lottery\"]\n{SEED004}"
        ));
        assert!(e.contains("unknown heuristic \"lottery\""), "{e}");
        let e = err(&SEED004
            .replace("release", "x")
            .replace("t_cpu = 18", "t_cpu = \"nH\""));
        assert!(e.contains("no [sweep] variable"), "{e}");
    }
}
