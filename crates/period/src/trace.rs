//! Trace readers: iosets' request traces, FTIO's bandwidth steps, TMIO and Darshan DXT.
//!
//! | format | name | content |
//! |---|---|---|
//! | [`Format::Csv`] | `csv` | iosets' request trace ([`requests`]): the server's `--trace` file, one request a row, times in integer nanoseconds; each request is an event from `arrival_ns` to `complete_ns` of `len` bytes (0 if it failed). A header without `arrival_ns` is read as the older dialect `start,end,bytes[,job]` (seconds, bytes; column order free, `start_s`/`end_s` accepted, other columns ignored) |
//! | [`Format::Jsonl`] | `jsonl` | one request a line: `{"start": s, "end": s, "bytes": n, "job": j}` (`job` optional) |
//! | [`Format::Ftio`] | `ftio` | FTIO's application-level bandwidth: `{"t": [...], "b": [...]}`, `b[i]` bytes/s from `t[i]` to `t[i+1]` (optional `"job"`) |
//! | [`Format::Tmio`] | `tmio` | TMIO's JSON Lines (FTIO's tracing library): per line one of `read_sync`, `write_sync`, `read_async_t`, `write_async_t` with per-request `b_ind`/`t_ind_s`/`t_ind_e` (or per-rank `b_rank_avr`/`t_rank_s`/`t_rank_e`) |
//! | [`Format::Dxt`] | `dxt` | Darshan DXT as printed by `darshan-dxt-parser`: `X_POSIX rank op segment offset length start end [OST]`; the job from the `# jobid:` header line; X_MPIIO records are used only if there are no X_POSIX ones (MPI-IO calls turn into POSIX calls, which would count twice) |
//!
//! Every reader refuses a malformed line with an [`Error::Parse`] naming the line, and a trace
//! without a single event with [`Error::Empty`]. None panics, whatever the input.
//!
//! The request trace is also what `iosets replay` replays; its reader and writer
//! ([`requests::TraceWriter`], used by the server) are in [`requests`].

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use iosets_types::{JobId, Nanos};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::event::{Event, JobEvent};

pub mod requests;

pub use requests::{
    parse_requests, read_requests, RequestRecord, TraceOp, TraceWriter, REQUEST_HEADER,
};

/// A trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// iosets' request trace (CSV; see [`requests`]), or the older `start,end,bytes` CSV.
    Csv,
    /// iosets JSON Lines requests.
    Jsonl,
    /// FTIO's `{"t": [...], "b": [...]}` bandwidth steps.
    Ftio,
    /// TMIO JSON Lines.
    Tmio,
    /// Darshan DXT text.
    Dxt,
}

impl Format {
    /// Every format's name, as accepted by [`Format::from_str`].
    pub const NAMES: &'static [&'static str] = &["csv", "jsonl", "ftio", "tmio", "dxt"];

    /// The format's name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
            Format::Ftio => "ftio",
            Format::Tmio => "tmio",
            Format::Dxt => "dxt",
        }
    }

    /// Guesses the format from the file name and its first lines; `None` if nothing fits.
    pub fn sniff(path: &Path, text: &str) -> Option<Format> {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && (!l.starts_with('#') || l.starts_with("# DXT")));
        let content = || -> Option<Format> {
            let l = first?;
            if l.starts_with("# DXT") || l.starts_with("X_") {
                return Some(Format::Dxt);
            }
            if text.lines().any(|l| l.trim_start().starts_with("# DXT")) {
                return Some(Format::Dxt);
            }
            if l.starts_with('{') {
                if [
                    "read_sync",
                    "write_sync",
                    "read_async",
                    "write_async",
                    "io_time",
                ]
                .iter()
                .any(|k| l.contains(&format!("\"{k}")))
                {
                    return Some(Format::Tmio);
                }
                if l.contains("\"start\"") {
                    return Some(Format::Jsonl);
                }
                if l.contains("\"t\"") || l == "{" {
                    return Some(Format::Ftio);
                }
                return None;
            }
            let lower = l.to_ascii_lowercase();
            (lower.contains(',') && (lower.contains("start") || lower.contains("arrival_ns")))
                .then_some(Format::Csv)
        };
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("csv") => Some(Format::Csv),
            Some("json") => Some(Format::Ftio),
            Some("jsonl" | "ndjson") => match content() {
                Some(Format::Tmio) => Some(Format::Tmio),
                _ => Some(Format::Jsonl),
            },
            _ => content(),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "csv" => Ok(Format::Csv),
            "jsonl" | "ndjson" => Ok(Format::Jsonl),
            "ftio" | "ftio-json" | "json" => Ok(Format::Ftio),
            "tmio" | "tmio-jsonl" => Ok(Format::Tmio),
            "dxt" | "darshan" | "darshan-dxt" => Ok(Format::Dxt),
            _ => Err(Error::UnknownFormat {
                name: s.to_string(),
            }),
        }
    }
}

/// A trace read from a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The format it was read as.
    pub format: Format,
    /// Its events, in file order.
    pub events: Vec<JobEvent>,
}

impl Trace {
    /// The events of each job, each list sorted by start.
    pub fn by_job(&self) -> BTreeMap<JobId, Vec<Event>> {
        let mut jobs: BTreeMap<JobId, Vec<Event>> = BTreeMap::new();
        for e in &self.events {
            jobs.entry(e.job).or_default().push(e.event);
        }
        for v in jobs.values_mut() {
            v.sort_by_key(|e| (e.start, e.end));
        }
        jobs
    }
}

/// Reads a trace file; without `format`, guesses it with [`Format::sniff`].
pub fn read_trace(path: &Path, format: Option<Format>) -> Result<Trace> {
    let bytes = read_bytes(path)?;
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => {
            let format = format
                .or_else(|| Format::sniff(path, &String::from_utf8_lossy(&bytes)))
                .unwrap_or(Format::Csv);
            return Err(not_utf8(&bytes, e, format));
        }
    };
    let format = match format {
        Some(f) => f,
        None => Format::sniff(path, text).ok_or_else(|| Error::UnknownContent {
            path: path.to_path_buf(),
        })?,
    };
    Ok(Trace {
        format,
        events: parse(text, format)?,
    })
}

/// The file at `path` as text; not UTF-8 is a parse error of `format` naming the line.
pub(crate) fn read_text(path: &Path, format: Format) -> Result<String> {
    String::from_utf8(read_bytes(path)?).map_err(|e| {
        let err = e.utf8_error();
        not_utf8(e.as_bytes(), err, format)
    })
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn not_utf8(bytes: &[u8], e: std::str::Utf8Error, format: Format) -> Error {
    let line = 1 + bytes[..e.valid_up_to()]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    Error::Parse {
        format,
        line,
        message: "not UTF-8 text (is this a binary file? a Darshan log must be printed \
                  with darshan-dxt-parser first)"
            .into(),
    }
}

/// Parses a trace held in memory.
pub fn parse(text: &str, format: Format) -> Result<Vec<JobEvent>> {
    let events = match format {
        Format::Csv => parse_csv(text)?,
        Format::Jsonl => parse_jsonl(text)?,
        Format::Ftio => parse_ftio(text)?,
        Format::Tmio => parse_tmio(text)?,
        Format::Dxt => parse_dxt(text)?,
    };
    if events.is_empty() {
        return Err(Error::Empty {
            format,
            detail: match format {
                Format::Csv => "no request after the header".into(),
                Format::Jsonl => "no request line".into(),
                Format::Ftio => "no step with a positive bandwidth and duration".into(),
                Format::Tmio => {
                    "no request in read_sync, write_sync, read_async_t or write_async_t".into()
                }
                Format::Dxt => "no X_POSIX or X_MPIIO record".into(),
            },
        });
    }
    Ok(events)
}

/// FTIO's application-level bandwidth of `events`: sample times `t` (seconds) and the total
/// bandwidth `b[i]` (bytes/s) from `t[i]` to `t[i + 1]`; the last sample is 0. Instantaneous
/// events are dropped (they have no bandwidth).
pub fn bandwidth_steps(events: &[Event]) -> (Vec<f64>, Vec<f64>) {
    let mut edges: Vec<(Nanos, f64)> = Vec::with_capacity(2 * events.len());
    for e in events {
        if e.end > e.start && e.bytes > 0 {
            let rate = e.bytes as f64 / (e.end - e.start).as_secs_f64();
            edges.push((e.start, rate));
            edges.push((e.end, -rate));
        }
    }
    edges.sort_by_key(|&(t, _)| t);
    let (mut t, mut b) = (Vec::new(), Vec::new());
    let mut level = 0.0;
    let mut i = 0;
    while i < edges.len() {
        let now = edges[i].0;
        while i < edges.len() && edges[i].0 == now {
            level += edges[i].1;
            i += 1;
        }
        if level.abs() < 1e-6 * edges.iter().map(|e| e.1.abs()).fold(0.0, f64::max) {
            level = 0.0;
        }
        t.push(now.as_secs_f64());
        b.push(level.max(0.0));
    }
    (t, b)
}

/// `events` as an FTIO bandwidth-step JSON document (see [`bandwidth_steps`]).
pub fn to_ftio_json(events: &[Event]) -> String {
    let (t, b) = bandwidth_steps(events);
    serde_json::json!({ "t": t, "b": b }).to_string()
}

fn parse_err(format: Format, line: usize, message: impl Into<String>) -> Error {
    Error::Parse {
        format,
        line,
        message: message.into(),
    }
}

/// Largest time accepted, seconds (about 584 years: the range of `Nanos`).
const MAX_SECS: f64 = 1.8e10;

fn seconds(format: Format, line: usize, what: &str, v: f64) -> Result<Nanos> {
    if !v.is_finite() || v < 0.0 {
        return Err(parse_err(
            format,
            line,
            format!("{what} {v} is not a time: expected seconds ≥ 0"),
        ));
    }
    if v > MAX_SECS {
        return Err(parse_err(
            format,
            line,
            format!("{what} {v} s is out of range (at most {MAX_SECS:e} s)"),
        ));
    }
    Ok(Nanos::from_secs_f64(v))
}

fn event(format: Format, line: usize, start: f64, end: f64, bytes: u64) -> Result<Event> {
    let (s, e) = (
        seconds(format, line, "start", start)?,
        seconds(format, line, "end", end)?,
    );
    if e < s {
        return Err(parse_err(
            format,
            line,
            format!("end {end} is before start {start}"),
        ));
    }
    Ok(Event::new(s, e, bytes))
}

fn non_comment_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// A request trace if the header names `arrival_ns`, else the older seconds dialect.
fn parse_csv(text: &str) -> Result<Vec<JobEvent>> {
    if requests::is_request_trace(text) {
        return requests::parse_events(text);
    }
    parse_seconds_csv(text)
}

/// The older `start,end,bytes[,job]` dialect, times in seconds.
fn parse_seconds_csv(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Csv;
    let mut lines = non_comment_lines(text);
    let Some((hline, header)) = lines.next() else {
        return Err(Error::Empty {
            format: F,
            detail: "no header line (expected a request trace's \
                     job,op,offset,len,arrival_ns[,...], or start,end,bytes[,job])"
                .into(),
        });
    };
    let cols: Vec<String> = header
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let find = |names: &[&str]| cols.iter().position(|c| names.contains(&c.as_str()));
    let (Some(si), Some(ei), Some(bi)) = (
        find(&["start", "start_s"]),
        find(&["end", "end_s"]),
        find(&["bytes", "size"]),
    ) else {
        return Err(parse_err(
            F,
            hline,
            format!(
                "header {header:?} lacks start, end or bytes (expected a request trace's \
                 {REQUEST_HEADER} header, with at least job,op,offset,len,arrival_ns, or the \
                 older start,end,bytes[,job])"
            ),
        ));
    };
    let ji = find(&["job"]);
    let mut out = Vec::new();
    for (n, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != cols.len() {
            return Err(parse_err(
                F,
                n,
                format!(
                    "{} fields where the header has {}",
                    fields.len(),
                    cols.len()
                ),
            ));
        }
        let num = |i: usize, what: &str| -> Result<f64> {
            fields[i]
                .parse::<f64>()
                .map_err(|_| parse_err(F, n, format!("{what} {:?} is not a number", fields[i])))
        };
        let int = |i: usize, what: &str| -> Result<u64> {
            fields[i].parse::<u64>().map_err(|_| {
                parse_err(
                    F,
                    n,
                    format!("{what} {:?} is not a whole number ≥ 0", fields[i]),
                )
            })
        };
        let ev = event(F, n, num(si, "start")?, num(ei, "end")?, int(bi, "bytes")?)?;
        let job = match ji {
            Some(j) => JobId(int(j, "job")?),
            None => JobId(0),
        };
        out.push(JobEvent { job, event: ev });
    }
    Ok(out)
}

#[derive(serde::Deserialize)]
struct JsonlRecord {
    start: f64,
    end: f64,
    bytes: u64,
    #[serde(default)]
    job: u64,
}

fn parse_jsonl(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Jsonl;
    let mut out = Vec::new();
    for (n, line) in non_comment_lines(text) {
        let r: JsonlRecord = serde_json::from_str(line)
            .map_err(|e| parse_err(F, n, format!("not a request record ({e})")))?;
        out.push(JobEvent {
            job: JobId(r.job),
            event: event(F, n, r.start, r.end, r.bytes)?,
        });
    }
    Ok(out)
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

fn number_array(format: Format, line: usize, v: Option<&Value>, key: &str) -> Result<Vec<f64>> {
    let Some(v) = v else {
        return Err(parse_err(
            format,
            line,
            format!("missing the {key:?} array"),
        ));
    };
    let Some(a) = v.as_array() else {
        return Err(parse_err(format, line, format!("{key:?} is not an array")));
    };
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .ok_or_else(|| parse_err(format, line, format!("{key}[{i}] = {x} is not a number")))
        })
        .collect()
}

fn parse_ftio(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Ftio;
    if text.trim().is_empty() {
        return Err(Error::Empty {
            format: F,
            detail: "the file is empty".into(),
        });
    }
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| parse_err(F, e.line(), format!("not JSON ({e})")))?;
    let Some(obj) = doc.as_object() else {
        return Err(parse_err(
            F,
            1,
            "expected an object {\"t\": [...], \"b\": [...]}",
        ));
    };
    // Semantic errors point at the line where the array starts.
    let at = |key: &str| {
        text.find(&format!("\"{key}\""))
            .map_or(1, |o| line_of(text, o))
    };
    let t = number_array(F, at("t"), obj.get("t"), "t")?;
    let b = number_array(F, at("b"), obj.get("b"), "b")?;
    if t.len() != b.len() {
        return Err(parse_err(
            F,
            at("b"),
            format!("\"t\" has {} samples but \"b\" has {}", t.len(), b.len()),
        ));
    }
    let job = match obj.get("job") {
        None => JobId(0),
        Some(j) => JobId(j.as_u64().ok_or_else(|| {
            parse_err(F, at("job"), format!("job {j} is not a whole number ≥ 0"))
        })?),
    };
    let mut out = Vec::new();
    for i in 0..t.len() {
        seconds(F, at("t"), &format!("t[{i}] ="), t[i])?;
        if !(b[i].is_finite() && b[i] >= 0.0) {
            return Err(parse_err(
                F,
                at("b"),
                format!("b[{i}] = {} is not a bandwidth ≥ 0", b[i]),
            ));
        }
        if i > 0 && t[i] < t[i - 1] {
            return Err(parse_err(
                F,
                at("t"),
                format!("t[{i}] = {} is before t[{}] = {}", t[i], i - 1, t[i - 1]),
            ));
        }
    }
    for i in 0..t.len().saturating_sub(1) {
        let bytes = (b[i] * (t[i + 1] - t[i])).round();
        if bytes >= 1.0 {
            let bytes = bytes.min(u64::MAX as f64) as u64;
            out.push(JobEvent {
                job,
                event: event(F, at("t"), t[i], t[i + 1], bytes)?,
            });
        }
    }
    Ok(out)
}

fn parse_tmio(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Tmio;
    const MODES: [&str; 4] = ["read_sync", "write_sync", "read_async_t", "write_async_t"];
    let mut out = Vec::new();
    for (n, line) in non_comment_lines(text) {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| parse_err(F, n, format!("not a JSON object ({e})")))?;
        let Some(obj) = v.as_object() else {
            return Err(parse_err(F, n, "not a JSON object"));
        };
        for mode in MODES {
            let Some(section) = obj.get(mode) else {
                continue;
            };
            let Some(bw) = section.get("bandwidth") else {
                return Err(parse_err(
                    F,
                    n,
                    format!("{mode} has no \"bandwidth\" object"),
                ));
            };
            let names = if bw.get("b_ind").is_some() {
                ["b_ind", "t_ind_s", "t_ind_e"]
            } else {
                ["b_rank_avr", "t_rank_s", "t_rank_e"]
            };
            if bw.get(names[0]).is_none() {
                continue;
            }
            let b = number_array(F, n, bw.get(names[0]), names[0])?;
            let s = number_array(F, n, bw.get(names[1]), names[1])?;
            let e = number_array(F, n, bw.get(names[2]), names[2])?;
            if b.len() != s.len() || b.len() != e.len() {
                return Err(parse_err(
                    F,
                    n,
                    format!(
                        "{mode}: {} has {} values, {} {} and {} {}",
                        names[0],
                        b.len(),
                        names[1],
                        s.len(),
                        names[2],
                        e.len()
                    ),
                ));
            }
            for i in 0..b.len() {
                if !(b[i].is_finite() && b[i] >= 0.0) {
                    return Err(parse_err(
                        F,
                        n,
                        format!(
                            "{mode}: {}[{i}] = {} is not a bandwidth ≥ 0",
                            names[0], b[i]
                        ),
                    ));
                }
                let ev = event(F, n, s[i], e[i], 0)?;
                let bytes = (b[i] * (e[i] - s[i])).round().min(u64::MAX as f64) as u64;
                out.push(JobEvent {
                    job: JobId(0),
                    event: Event { bytes, ..ev },
                });
            }
        }
    }
    Ok(out)
}

fn parse_dxt(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Dxt;
    let mut job = JobId(0);
    let mut posix = Vec::new();
    let mut other = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            if let Some(id) = c.trim().strip_prefix("jobid:") {
                let id = id.trim();
                job = JobId(id.parse().map_err(|_| {
                    parse_err(F, n, format!("jobid {id:?} is not a whole number ≥ 0"))
                })?);
            }
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if !f[0].starts_with("X_") {
            return Err(parse_err(
                F,
                n,
                format!(
                    "expected a DXT record (X_POSIX rank op segment offset length start end) or \
                     a # line, found {:?}",
                    truncate(line)
                ),
            ));
        }
        if f.len() < 8 {
            return Err(parse_err(
                F,
                n,
                format!("a DXT record has 8 fields (module rank op segment offset length start end), this one {}", f.len()),
            ));
        }
        if !matches!(f[2], "read" | "write") {
            return Err(parse_err(
                F,
                n,
                format!("operation {:?} is neither read nor write", f[2]),
            ));
        }
        let length: u64 = f[5]
            .parse()
            .map_err(|_| parse_err(F, n, format!("length {:?} is not a whole number ≥ 0", f[5])))?;
        let time = |s: &str, what: &str| -> Result<f64> {
            s.parse::<f64>()
                .map_err(|_| parse_err(F, n, format!("{what} {s:?} is not a number of seconds")))
        };
        let ev = event(F, n, time(f[6], "start")?, time(f[7], "end")?, length)?;
        if f[0] == "X_POSIX" {
            posix.push(ev);
        } else {
            other.push(ev);
        }
    }
    let chosen = if posix.is_empty() { other } else { posix };
    Ok(chosen
        .into_iter()
        .map(|event| JobEvent { job, event })
        .collect())
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_through_the_ftio_reader() {
        let ev = [
            Event::from_secs(1.0, 2.0, 1000),
            Event::from_secs(1.5, 3.0, 3000),
            Event::from_secs(10.0, 10.0, 5),
        ];
        let (t, b) = bandwidth_steps(&ev);
        assert_eq!(t, vec![1.0, 1.5, 2.0, 3.0]);
        assert_eq!(b, vec![1000.0, 3000.0, 2000.0, 0.0]);
        let back = parse(&to_ftio_json(&ev), Format::Ftio).unwrap();
        let bytes: u64 = back.iter().map(|e| e.event.bytes).sum();
        assert_eq!(bytes, 4000);
    }

    #[test]
    fn format_names_parse_and_print() {
        for name in Format::NAMES {
            let f: Format = name.parse().unwrap();
            assert_eq!(f.name(), *name);
        }
        assert!(matches!(
            "xml".parse::<Format>(),
            Err(Error::UnknownFormat { .. })
        ));
    }
}
