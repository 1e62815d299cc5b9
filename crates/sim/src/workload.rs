//! Workloads for the replay: a seeded generator, and traces.
//!
//! A workload is a `Vec<Request>` with each request's `arrival` set; [`crate::replay::run`] enqueues
//! each request at its arrival.
//!
//! The generator ([`WorkloadSpec`]) follows seed 000's test (requests of random sizes, attributed
//! at random to the queues, all queued at time zero) and adds round-robin attribution, a bounded
//! Pareto size law, Poisson arrivals, and per-job priorities and classes. It is reproducible: the same
//! spec and seed give the same requests (ChaCha8 stream).
//!
//! A trace is either iosets' request trace — the server's `--trace` file, or one written by hand
//! in the same schema (`docs/trace-format.md`): read it with
//! [`iosets_period::trace::read_requests`] and turn it into a workload with [`from_records`] — or
//! the older `time_s,job,size` dialect, read by [`read_csv`]. Both readers refuse, with the line
//! number, anything they cannot use: they never skip or guess.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use iosets_period::trace::RequestRecord;
use iosets_types::{ClassId, FileId, JobId, Nanos, Op, Priority, Request, RequestId};

use crate::error::CsvProblem;
use crate::SimError;

/// Shape parameter of the bounded Pareto law used by default for heavy-tailed sizes: about half the
/// requests are below 2 × min, one in a few hundred is above 256 × min.
pub const DEFAULT_PARETO_ALPHA: f64 = 1.1;

/// The law request sizes are drawn from, in bytes, bounds included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sizes {
    /// Uniform over `[min, max]`.
    Uniform {
        /// Smallest size.
        min: u64,
        /// Largest size.
        max: u64,
    },
    /// Bounded Pareto on `[min, max]` with shape `alpha` (> 0): mostly small requests, a heavy tail
    /// of large ones.
    BoundedPareto {
        /// Smallest size (the Pareto scale).
        min: u64,
        /// Largest size (the cut-off).
        max: u64,
        /// Shape: smaller means a heavier tail.
        alpha: f64,
    },
}

impl Sizes {
    fn bounds(&self) -> (u64, u64) {
        match *self {
            Sizes::Uniform { min, max } | Sizes::BoundedPareto { min, max, .. } => (min, max),
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        match *self {
            Sizes::Uniform { min, max } => rng.gen_range(min..=max),
            Sizes::BoundedPareto { min, max, alpha } => {
                // Inverse CDF of the Pareto law with scale `min`, truncated at `max`.
                let (l, h) = (min as f64, max as f64);
                let u: f64 = rng.gen();
                let x = l / (1.0 - u * (1.0 - (l / h).powf(alpha))).powf(1.0 / alpha);
                (x.round() as u64).clamp(min, max)
            }
        }
    }
}

/// How requests are attributed to jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assign {
    /// Each request goes to a job drawn uniformly at random (seed 000).
    Random,
    /// Request `i` goes to job `1 + i mod jobs`.
    RoundRobin,
}

/// When requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    /// All at time zero: every queue backlogged from the start (seed 000).
    Backlogged,
    /// A Poisson process: exponential gaps with mean `1 / rate_per_s` seconds, the first one
    /// after time zero.
    Poisson {
        /// Requests per second, > 0.
        rate_per_s: f64,
    },
}

/// A generated workload: `requests` requests spread over `jobs` jobs numbered `1..=jobs`.
///
/// Job `j` writes sequentially in its own file (`FileId(j)`), each request starting where the job's
/// previous one ended. Request ids are `0..requests` in generation order (which is also arrival
/// order).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Number of jobs (≥ 1).
    pub jobs: u64,
    /// Number of requests (≥ 1).
    pub requests: usize,
    /// Size law.
    pub sizes: Sizes,
    /// Attribution of requests to jobs.
    pub assign: Assign,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Priority hint of each job (`priorities[j - 1]` for job `j`); empty for none. If not empty,
    /// one per job.
    pub priorities: Vec<Priority>,
    /// Class of each job (`classes[j - 1]` for job `j`); empty for none. If not empty, one per job.
    pub classes: Vec<ClassId>,
    /// Seed of the random stream.
    pub seed: u64,
}

impl WorkloadSpec {
    /// Seed 000's setting with `jobs` queues and `requests` requests: uniform sizes of 1 to 1000
    /// bytes, random attribution, all backlogged at time zero, no priorities or classes, seed 0.
    pub fn new(jobs: u64, requests: usize) -> WorkloadSpec {
        WorkloadSpec {
            jobs,
            requests,
            sizes: Sizes::Uniform { min: 1, max: 1000 },
            assign: Assign::Random,
            arrivals: Arrivals::Backlogged,
            priorities: Vec::new(),
            classes: Vec::new(),
            seed: 0,
        }
    }

    /// Checks every parameter; see the field docs for the ranges.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |field, problem: String| Err(SimError::InvalidSpec { field, problem });
        if self.jobs == 0 {
            return bad("jobs", "must be at least 1".into());
        }
        if self.requests == 0 {
            return bad("requests", "must be at least 1".into());
        }
        let (min, max) = self.sizes.bounds();
        if min == 0 {
            return bad("size_min", "must be at least 1 byte".into());
        }
        if min > max {
            return bad("size_min", format!("{min} is larger than size_max {max}"));
        }
        if let Sizes::BoundedPareto { alpha, .. } = self.sizes {
            if !(alpha.is_finite() && alpha > 0.0) {
                return bad("alpha", format!("{alpha}: must be a finite number > 0"));
            }
        }
        if let Arrivals::Poisson { rate_per_s } = self.arrivals {
            if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
                return bad(
                    "rate",
                    format!("{rate_per_s}: must be a finite number of requests/s > 0"),
                );
            }
        }
        let per_job = |field, n: usize| {
            if n != 0 && n as u64 != self.jobs {
                bad(
                    field,
                    format!("{n} given for {} jobs: give one per job", self.jobs),
                )
            } else {
                Ok(())
            }
        };
        per_job("priorities", self.priorities.len())?;
        per_job("classes", self.classes.len())
    }

    /// Generates the requests (see the type docs), after [`WorkloadSpec::validate`].
    pub fn generate(&self) -> Result<Vec<Request>, SimError> {
        self.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut offsets = vec![0u64; self.jobs as usize];
        let mut t = 0.0f64;
        let mut out = Vec::with_capacity(self.requests);
        for i in 0..self.requests {
            let job = match self.assign {
                Assign::Random => rng.gen_range(1..=self.jobs),
                Assign::RoundRobin => 1 + i as u64 % self.jobs,
            };
            let len = self.sizes.sample(&mut rng);
            let arrival = match self.arrivals {
                Arrivals::Backlogged => Nanos::ZERO,
                Arrivals::Poisson { rate_per_s } => {
                    let u: f64 = rng.gen();
                    t += -(1.0 - u).ln() / rate_per_s;
                    Nanos::from_secs_f64(t)
                }
            };
            let j = (job - 1) as usize;
            let mut req = Request::builder(JobId(job), Op::Write)
                .id(RequestId(i as u64))
                .file(FileId(job))
                .range(offsets[j], len)
                .build();
            offsets[j] += len;
            req.arrival = arrival;
            req.priority = self.priorities.get(j).copied();
            req.class = self.classes.get(j).copied();
            out.push(req);
        }
        Ok(out)
    }
}

/// A request trace's rows as a workload, in row order: request `i` has id `i` and row `i`'s job,
/// offset, length and arrival, no class and no priority hint; its file is
/// [`RequestRecord::file_id`] (the server's file id of the row's path) and its operation
/// [`TraceOp::op`](iosets_period::trace::TraceOp::op) (an fsync is [`Op::Other`], metadata
/// [`Op::Meta`], as the server submits them). Dispatch and completion times, errno and tag are what the traced run did; the
/// replay makes its own.
pub fn from_records(records: &[RequestRecord]) -> Vec<Request> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| Request {
            phase: None,
            id: RequestId(i as u64),
            job: r.job,
            class: None,
            file: r.file_id(),
            offset: r.offset,
            len: r.len,
            op: r.op.op(),
            priority: None,
            user: None,
            arrival: r.arrival,
        })
        .collect()
}

/// The columns a trace may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Time,
    Job,
    Size,
    File,
    Offset,
    Op,
    Class,
    Priority,
}

impl Column {
    fn from_name(name: &str) -> Option<Column> {
        Some(match name {
            "time_s" => Column::Time,
            "job" => Column::Job,
            "size" => Column::Size,
            "file" => Column::File,
            "offset" => Column::Offset,
            "op" => Column::Op,
            "class" => Column::Class,
            "priority" => Column::Priority,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Column::Time => "time_s",
            Column::Job => "job",
            Column::Size => "size",
            Column::File => "file",
            Column::Offset => "offset",
            Column::Op => "op",
            Column::Class => "class",
            Column::Priority => "priority",
        }
    }
}

fn csv_err(line: usize, problem: CsvProblem) -> SimError {
    SimError::Csv {
        path: None,
        line,
        problem,
    }
}

fn parse_u64(column: Column, value: &str) -> Result<u64, CsvProblem> {
    value.parse().map_err(|_| CsvProblem::BadNumber {
        column: column.name(),
        value: value.to_string(),
        expected: "a whole number ≥ 0",
    })
}

fn parse_f64(column: Column, value: &str) -> Result<f64, CsvProblem> {
    value.parse().map_err(|_| CsvProblem::BadNumber {
        column: column.name(),
        value: value.to_string(),
        expected: "a number",
    })
}

/// Reads a trace in the older `time_s,job,size` dialect into a workload (iosets' request trace is
/// read by [`iosets_period::trace::read_requests`], see [`from_records`]).
///
/// The first line that is neither blank nor a `#` comment is the header: comma-separated column
/// names, in any order. Required: `time_s` (arrival, seconds ≥ 0), `job` (job id), `size` (bytes).
/// Optional: `file` (file id; default: the job id), `offset` (bytes; default: where the job's
/// previous request in that file ended), `op` (`read`, `write` or `other`; default `write`), `class`
/// (class id; empty for none), `priority` (a number > 0; empty for none). Every following non-blank,
/// non-comment line is one request, with as many fields as the header; fields are trimmed, quoting
/// is not supported. Lines need not be sorted by time. Request ids are `0, 1, ...` in line order.
///
/// # Errors
/// [`SimError::Csv`] with the 1-based line number and a [`CsvProblem`] for the first unusable line
/// (an empty file is line 1), [`SimError::Io`] if reading fails.
pub fn read_csv<R: BufRead>(reader: R) -> Result<Vec<Request>, SimError> {
    let mut columns: Option<Vec<Column>> = None;
    let mut last_line = 0;
    let mut out = Vec::new();
    let mut next_offset: HashMap<(JobId, FileId), u64> = HashMap::new();
    for (n, line) in reader.lines().enumerate() {
        let lineno = n + 1;
        last_line = lineno;
        let line = line.map_err(|error| SimError::Io { path: None, error })?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let Some(cols) = &columns else {
            columns = Some(parse_header(&fields).map_err(|p| csv_err(lineno, p))?);
            continue;
        };
        if fields.len() != cols.len() {
            let problem = CsvProblem::FieldCount {
                expected: cols.len(),
                found: fields.len(),
            };
            return Err(csv_err(lineno, problem));
        }
        let req = parse_row(out.len() as u64, cols, &fields, &mut next_offset)
            .map_err(|p| csv_err(lineno, p))?;
        out.push(req);
    }
    match columns {
        None => Err(csv_err(1, CsvProblem::Empty)),
        Some(_) if out.is_empty() => Err(csv_err(last_line.max(1), CsvProblem::NoRequests)),
        Some(_) => Ok(out),
    }
}

/// [`read_csv`] on the file at `path`; errors name the file.
pub fn read_csv_file(path: &Path) -> Result<Vec<Request>, SimError> {
    let with_path = |error| SimError::Io {
        path: Some(path.to_path_buf()),
        error,
    };
    let file = std::fs::File::open(path).map_err(with_path)?;
    read_csv(std::io::BufReader::new(file)).map_err(|e| match e {
        SimError::Io { path: None, error } => with_path(error),
        SimError::Csv {
            path: None,
            line,
            problem,
        } => SimError::Csv {
            path: Some(path.to_path_buf()),
            line,
            problem,
        },
        other => other,
    })
}

fn parse_header(fields: &[&str]) -> Result<Vec<Column>, CsvProblem> {
    let mut cols = Vec::with_capacity(fields.len());
    for f in fields {
        let name = f.to_ascii_lowercase();
        let col = Column::from_name(&name).ok_or(CsvProblem::UnknownColumn {
            name: f.to_string(),
        })?;
        if cols.contains(&col) {
            return Err(CsvProblem::DuplicateColumn {
                name: f.to_string(),
            });
        }
        cols.push(col);
    }
    for required in [Column::Time, Column::Job, Column::Size] {
        if !cols.contains(&required) {
            return Err(CsvProblem::MissingColumn {
                name: required.name(),
            });
        }
    }
    Ok(cols)
}

fn parse_row(
    id: u64,
    cols: &[Column],
    fields: &[&str],
    next_offset: &mut HashMap<(JobId, FileId), u64>,
) -> Result<Request, CsvProblem> {
    let mut time = 0.0;
    let (mut job, mut size) = (0, 0);
    let (mut file, mut offset, mut class, mut priority) = (None, None, None, None);
    let mut op = Op::Write;
    for (&col, &value) in cols.iter().zip(fields) {
        match col {
            Column::Time => {
                time = parse_f64(col, value)?;
                if !time.is_finite() {
                    return Err(CsvProblem::BadNumber {
                        column: col.name(),
                        value: value.to_string(),
                        expected: "a finite number of seconds",
                    });
                }
                if time < 0.0 {
                    return Err(CsvProblem::NegativeTime { value: time });
                }
            }
            Column::Job => job = parse_u64(col, value)?,
            Column::Size => size = parse_u64(col, value)?,
            Column::File => file = Some(parse_u64(col, value)?),
            Column::Offset => offset = Some(parse_u64(col, value)?),
            Column::Op => {
                op = value.parse().map_err(|_| CsvProblem::UnknownOp {
                    value: value.to_string(),
                })?
            }
            Column::Class if value.is_empty() => {}
            Column::Class => class = Some(ClassId(parse_u64(col, value)?)),
            Column::Priority if value.is_empty() => {}
            Column::Priority => {
                let p = parse_f64(col, value)?;
                priority = Some(Priority::new(p).ok_or(CsvProblem::BadPriority { value: p })?);
            }
        }
    }
    let file = file.unwrap_or(job);
    let next = next_offset.entry((JobId(job), FileId(file))).or_insert(0);
    let offset = offset.unwrap_or(*next);
    *next = offset.saturating_add(size);
    Ok(Request {
        phase: None,
        id: RequestId(id),
        job: JobId(job),
        class,
        file: FileId(file),
        offset,
        len: size,
        op,
        priority,
        user: None,
        arrival: Nanos::from_secs_f64(time),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pareto_sizes_stay_in_bounds_and_lean_small() {
        let spec = WorkloadSpec {
            sizes: Sizes::BoundedPareto {
                min: 4096,
                max: 4 << 20,
                alpha: DEFAULT_PARETO_ALPHA,
            },
            ..WorkloadSpec::new(2, 5000)
        };
        let w = spec.generate().unwrap();
        assert!(w.iter().all(|r| (4096..=4 << 20).contains(&r.len)));
        let small = w.iter().filter(|r| r.len < 2 * 4096).count();
        assert!(
            small > w.len() * 2 / 5,
            "{small} of {} below 2 × min",
            w.len()
        );
        assert!(w.iter().any(|r| r.len > 1 << 20), "no tail at all");
    }

    #[test]
    fn poisson_arrivals_increase_at_about_the_rate() {
        let spec = WorkloadSpec {
            arrivals: Arrivals::Poisson { rate_per_s: 1000.0 },
            ..WorkloadSpec::new(3, 10_000)
        };
        let w = spec.generate().unwrap();
        assert!(w.windows(2).all(|p| p[0].arrival <= p[1].arrival));
        let last = w.last().unwrap().arrival.as_secs_f64();
        assert!(
            (9.0..11.0).contains(&last),
            "10000 requests at 1000/s ended at {last}s"
        );
    }

    #[test]
    fn jobs_write_sequentially_in_their_own_files() {
        let spec = WorkloadSpec {
            assign: Assign::RoundRobin,
            ..WorkloadSpec::new(3, 30)
        };
        let w = spec.generate().unwrap();
        for j in 1..=3 {
            let mine: Vec<&Request> = w.iter().filter(|r| r.job == JobId(j)).collect();
            assert_eq!(mine.len(), 10);
            assert!(mine.iter().all(|r| r.file == FileId(j)));
            assert_eq!(mine[0].offset, 0);
            assert!(mine.windows(2).all(|p| p[1].offset == p[0].end()));
        }
    }

    #[test]
    fn spec_validation_names_the_field() {
        let check = |spec: WorkloadSpec, field: &str| match spec.generate() {
            Err(SimError::InvalidSpec { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected InvalidSpec({field}), got {other:?}"),
        };
        check(WorkloadSpec::new(0, 10), "jobs");
        check(WorkloadSpec::new(2, 0), "requests");
        check(
            WorkloadSpec {
                sizes: Sizes::Uniform { min: 10, max: 5 },
                ..WorkloadSpec::new(2, 5)
            },
            "size_min",
        );
        check(
            WorkloadSpec {
                sizes: Sizes::Uniform { min: 0, max: 5 },
                ..WorkloadSpec::new(2, 5)
            },
            "size_min",
        );
        check(
            WorkloadSpec {
                arrivals: Arrivals::Poisson { rate_per_s: 0.0 },
                ..WorkloadSpec::new(2, 5)
            },
            "rate",
        );
        let p = Priority::new(1.0).unwrap();
        check(
            WorkloadSpec {
                priorities: vec![p],
                ..WorkloadSpec::new(2, 5)
            },
            "priorities",
        );
        check(
            WorkloadSpec {
                classes: vec![ClassId(1); 3],
                ..WorkloadSpec::new(2, 5)
            },
            "classes",
        );
    }

    #[test]
    fn csv_defaults_fill_file_offset_and_op() {
        let text = "job,size,time_s\n1,10,0\n1,20,0.5\n2,5,0.25\n";
        let w = read_csv(text.as_bytes()).unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!((w[0].file, w[0].offset, w[0].op), (FileId(1), 0, Op::Write));
        assert_eq!((w[1].offset, w[1].arrival), (10, Nanos(500_000_000)));
        assert_eq!((w[2].file, w[2].offset), (FileId(2), 0));
        assert_eq!(w[2].id, RequestId(2));
    }
}
