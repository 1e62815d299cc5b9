//! Trace readers: iosets' request traces, and what FTIO users have — TMIO's JSON Lines, JSON and
//! MessagePack, FTIO's custom JSON and text pattern, GekkoFS's daemon JSON, Darshan DXT,
//! Recorder's text output and the metric proxy's MessagePack export.
//!
//! | [`Format`] | name | content |
//! |---|---|---|
//! | [`Format::Csv`] | `csv` | iosets' request trace ([`requests`]): the server's `--trace` file, one request a row, times in integer nanoseconds; each request is an event from `arrival_ns` to `complete_ns` of `len` bytes (0 if it failed). A header without `arrival_ns` is read as the older dialect `start,end,bytes[,job][,op]` (seconds, bytes; column order free, `start_s`/`end_s` accepted, other columns ignored) |
//! | [`Format::Jsonl`] | `jsonl` | one request a line: `{"start": s, "end": s, "bytes": n, "job": j, "op": "write"}` (`job`, `op` optional) |
//! | [`Format::Ftio`] | `ftio-json` | FTIO's custom JSON ([`bandwidth`]): rank level `b_rank_avr`/`t_rank_s`/`t_rank_e`, application level `b_overlap_avr`/`t_overlap`, in a mode section (`write_sync`, ...) or not, or the minimal `{"b": [...], "t": [...]}` |
//! | [`Format::Tmio`] | `tmio-jsonl` | TMIO's JSON Lines (online mode): per flush one line per section `read_sync`, `read_async_t`, `read_async_b`, `write_async_t`, `write_async_b`, `write_sync`, `io_time` |
//! | [`Format::TmioJson`] | `tmio-json` | TMIO's JSON (offline mode): one object with those sections |
//! | [`Format::TmioMsgpack`] | `tmio-msgpack` | TMIO's MessagePack stream ([`msgpack`]) |
//! | [`Format::FtioTxt`] | `ftio-txt` | FTIO's documented text pattern: `avg_thruput_mib: [...]`, `start_t_micro: [...]`, `end_t_micro: [...]` lines |
//! | [`Format::Gekko`] | `gekkofs-json` | GekkoFS's daemon JSON: the same arrays (and `req_size`) in one object |
//! | [`Format::Dxt`] | `dxt` | Darshan DXT as printed by `darshan-dxt-parser`: `X_POSIX rank op segment offset length start end [OSTs] [pthread]`; the job from the `# jobid:` header line; X_MPIIO records are used only if there are no X_POSIX ones (MPI-IO calls turn into POSIX calls, which would count twice) |
//! | [`Format::Recorder`] | `recorder` | Recorder as printed by `recorder2text` ([`recorder`]): a folder `_text` of `<rank>.txt` files (a directory given to [`read_trace`] is read so), one call a line, `tstart tend function level type ( args )` (2.1/2.2: `tstart tend result function ( args )`); the POSIX `read`/`write`/`pread`/`pwrite`/`readv`/`writev`/`fread`/`fwrite` calls are the events, their bytes from their arguments; every rank is job 0 |
//! | [`Format::MetricProxy`] | `metric-proxy` | the metric proxy's MessagePack export to FTIO ([`metric_proxy`]): `{"argv": [...], "metrics": {"infos": ..., "metrics": {name: [[t, value], ...]}}}`; the rises of its strace byte counters `total___strace___size___write`/`_read` are the events |
//!
//! Every event keeps its [`Direction`] (read or write) where the trace says it, so that a
//! detection can look at one [`Mode`] ([`Trace::by_job_in`]). [`read_trace`] recognises the
//! format from the content ([`Format::sniff`]), the file name only breaking ties; a file no
//! reader accepts is one [`Error::Unreadable`] naming each format tried and what it found. A
//! directory can only be Recorder's text output ([`recorder::read_dir`]).
//!
//! Every reader refuses a malformed line with an [`Error::Parse`] naming the line (a MessagePack
//! record: [`Error::Decode`]), and a trace without a single event with [`Error::Empty`]. None
//! panics, whatever the input.
//!
//! The request trace is also what `iosets replay` replays; its reader and writer
//! ([`requests::TraceWriter`], used by the server) are in [`requests`].

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use iosets_types::{JobId, Nanos};

use crate::error::{Error, Result};
use crate::event::{Direction, Event, JobEvent, Mode};

pub mod bandwidth;
pub mod metric_proxy;
pub mod msgpack;
pub mod recorder;
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
    /// FTIO's custom JSON, rank or application level.
    Ftio,
    /// TMIO JSON Lines.
    Tmio,
    /// TMIO JSON (one document).
    TmioJson,
    /// TMIO MessagePack.
    TmioMsgpack,
    /// FTIO's text pattern.
    FtioTxt,
    /// GekkoFS daemon JSON.
    Gekko,
    /// Darshan DXT text.
    Dxt,
    /// Recorder's text output (`recorder2text`), one rank's file or the folder of them.
    Recorder,
    /// The metric proxy's MessagePack trace export.
    MetricProxy,
}

impl Format {
    /// Every format, in the order [`read_trace`] tries them when the content does not tell.
    pub const ALL: [Format; 11] = [
        Format::Csv,
        Format::Jsonl,
        Format::Tmio,
        Format::TmioJson,
        Format::Ftio,
        Format::Gekko,
        Format::FtioTxt,
        Format::Dxt,
        Format::Recorder,
        Format::TmioMsgpack,
        Format::MetricProxy,
    ];

    /// Every format's name, as accepted by [`Format::from_str`], in the order of [`Format::ALL`].
    pub const NAMES: &'static [&'static str] = &[
        "csv",
        "jsonl",
        "tmio-jsonl",
        "tmio-json",
        "ftio-json",
        "gekkofs-json",
        "ftio-txt",
        "dxt",
        "recorder",
        "tmio-msgpack",
        "metric-proxy",
    ];

    /// The format's name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
            Format::Ftio => "ftio-json",
            Format::Tmio => "tmio-jsonl",
            Format::TmioJson => "tmio-json",
            Format::TmioMsgpack => "tmio-msgpack",
            Format::FtioTxt => "ftio-txt",
            Format::Gekko => "gekkofs-json",
            Format::Dxt => "dxt",
            Format::Recorder => "recorder",
            Format::MetricProxy => "metric-proxy",
        }
    }

    /// The format the content says, if it says one: MessagePack's array marker (TMIO) or map
    /// marker (the metric proxy), Darshan's `# DXT`/`X_POSIX` lines, a `recorder2text` record,
    /// a JSON object's keys, `key: [...]` lines, a CSV header. The file name is not looked at
    /// (see [`read_trace`]).
    pub fn sniff(bytes: &[u8]) -> Option<Format> {
        let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace())?;
        // A TMIO MessagePack record is an array (fixarray, array 16 or array 32) whose first
        // value is a string; never the start of UTF-8 text that a reader here accepts.
        if matches!(first, 0x90..=0x9f | 0xdc | 0xdd) {
            return Some(Format::TmioMsgpack);
        }
        // The metric proxy's export is a map (fixmap, map 16 or map 32): 0x80-0x8f never start
        // UTF-8 text, 0xde/0xdf only a character no text reader here accepts.
        if matches!(first, 0x80..=0x8f | 0xde | 0xdf) {
            return Some(Format::MetricProxy);
        }
        let head = &bytes[..bytes.len().min(1 << 16)];
        let text = match std::str::from_utf8(head) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""),
        };
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or("");
        if line.starts_with("X_")
            || text.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("# DXT") || l.starts_with("# darshan log version")
            })
        {
            return Some(Format::Dxt);
        }
        if recorder::looks_like(line) {
            return Some(Format::Recorder);
        }
        if line.starts_with('{') {
            let has = |k: &str| text.contains(&format!("\"{k}\""));
            let one_line = serde_json::from_str::<serde_json::Value>(&bandwidth_nan(line))
                .ok()
                .and_then(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()));
            if let Some(keys) = &one_line {
                const TMIO: [&str; 7] = [
                    "read_sync",
                    "read_async_t",
                    "read_async_b",
                    "write_async_t",
                    "write_async_b",
                    "write_sync",
                    "io_time",
                ];
                // TMIO writes seven lines per flush; one line alone is one JSON document.
                let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
                if keys.len() == 1 && TMIO.contains(&keys[0].as_str()) && lines > 1 {
                    return Some(Format::Tmio);
                }
                if keys.iter().any(|k| k == "start") {
                    return Some(Format::Jsonl);
                }
            }
            if has("start_t_micro") {
                return Some(Format::Gekko);
            }
            if has("io_time") || has("read_async_b") || has("write_async_b") {
                return Some(Format::TmioJson);
            }
            return Some(Format::Ftio);
        }
        if line.split_once(':').is_some_and(|(k, v)| {
            k.contains("_t_micro")
                || k.starts_with("avg_thr")
                || (k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && v.trim_start().starts_with('['))
        }) {
            return Some(Format::FtioTxt);
        }
        let lower = line.to_ascii_lowercase();
        (lower.contains(',') && (lower.contains("start") || lower.contains("arrival_ns")))
            .then_some(Format::Csv)
    }

    /// The formats a file named `path` most likely holds, by its extension (`.json`, `.jsonl`,
    /// `.msgpack`, `.txt`, `.csv`), then every other one: the order in which [`read_trace`]
    /// tries them when the content does not tell.
    pub fn by_name(path: &Path) -> Vec<Format> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let first: &[Format] = match ext.as_deref() {
            Some("csv") => &[Format::Csv],
            Some("jsonl" | "ndjson") => &[Format::Tmio, Format::Jsonl],
            Some("json") => &[Format::Ftio, Format::TmioJson, Format::Gekko],
            Some("msgpack" | "mpk") => &[Format::TmioMsgpack, Format::MetricProxy],
            Some("txt") => &[Format::FtioTxt, Format::Dxt, Format::Recorder],
            _ => &[],
        };
        let mut order = first.to_vec();
        order.extend(Format::ALL.iter().filter(|f| !first.contains(f)));
        order
    }
}

/// The line with TMIO's `NaN` readable by serde_json (for sniffing).
fn bandwidth_nan(line: &str) -> String {
    line.replace("NaN", "null")
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
            "tmio-json" => Ok(Format::TmioJson),
            "tmio-msgpack" | "msgpack" => Ok(Format::TmioMsgpack),
            "ftio-txt" | "txt" => Ok(Format::FtioTxt),
            "gekkofs-json" | "gekkofs" | "gekko" => Ok(Format::Gekko),
            "dxt" | "darshan" | "darshan-dxt" => Ok(Format::Dxt),
            "recorder" | "recorder-text" | "recorder2text" => Ok(Format::Recorder),
            "metric-proxy" | "proxy" | "metric-proxy-msgpack" => Ok(Format::MetricProxy),
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

/// How many events of a trace go each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionCounts {
    /// Reads.
    pub read: usize,
    /// Writes.
    pub write: usize,
    /// Neither (fsync, other).
    pub other: usize,
    /// Direction not given by the trace.
    pub unspecified: usize,
}

impl Trace {
    /// The events of each job, each list sorted by start: every event, whatever its direction.
    pub fn by_job(&self) -> BTreeMap<JobId, Vec<Event>> {
        self.by_job_in(Mode::All)
    }

    /// The events that count in `mode`, by job, each list sorted by start. A job none of whose
    /// events count is absent.
    pub fn by_job_in(&self, mode: Mode) -> BTreeMap<JobId, Vec<Event>> {
        let mut jobs: BTreeMap<JobId, Vec<Event>> = BTreeMap::new();
        for e in self.events.iter().filter(|e| mode.keeps(e.dir)) {
            jobs.entry(e.job).or_default().push(e.event);
        }
        for v in jobs.values_mut() {
            v.sort_by_key(|e| (e.start, e.end));
        }
        jobs
    }

    /// The mode `iosets detect` uses when none is named: [`Mode::Write`], FTIO's default, if
    /// the trace has a write; else [`Mode::All`] (a read-only trace, or one that does not say).
    pub fn default_mode(&self) -> Mode {
        if self.events.iter().any(|e| e.dir == Direction::Write) {
            Mode::Write
        } else {
            Mode::All
        }
    }

    /// How many events go each way.
    pub fn counts(&self) -> DirectionCounts {
        let mut c = DirectionCounts::default();
        for e in &self.events {
            match e.dir {
                Direction::Read => c.read += 1,
                Direction::Write => c.write += 1,
                Direction::Other => c.other += 1,
                Direction::Unspecified => c.unspecified += 1,
            }
        }
        c
    }
}

/// Reads a trace file. With `format`, only that reader is tried. Without, the format the
/// content says ([`Format::sniff`]) is tried alone; if the content does not tell, every reader
/// is tried in the order of [`Format::by_name`] and the first that reads the file wins.
///
/// A directory is read as Recorder's text output, the `<rank>.txt` files `recorder2text`
/// writes into `<trace folder>/_text` (see [`recorder::read_dir`]; the trace folder itself
/// can be named too).
///
/// # Errors
/// [`Error::Io`] if the file cannot be read, [`Error::EmptyFile`] if it holds nothing,
/// [`Error::Directory`] for a directory and a `format` other than [`Format::Recorder`], and
/// [`Error::Unreadable`] with each reader's error otherwise.
pub fn read_trace(path: &Path, format: Option<Format>) -> Result<Trace> {
    if path.is_dir() {
        return recorder::read_dir(path, format);
    }
    let bytes = read_bytes(path)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::EmptyFile {
            path: path.to_path_buf(),
        });
    }
    let order = match format.or_else(|| Format::sniff(&bytes)) {
        Some(f) => vec![f],
        None => {
            if let Err(e) = std::str::from_utf8(&bytes) {
                // Not text: only the binary reader can read it; say so once.
                return match parse_bytes(&bytes, Format::TmioMsgpack) {
                    Ok(events) => Ok(Trace {
                        format: Format::TmioMsgpack,
                        events,
                    }),
                    Err(m) => Err(Error::NotText {
                        path: path.to_path_buf(),
                        line: 1 + bytes[..e.valid_up_to()]
                            .iter()
                            .filter(|&&b| b == b'\n')
                            .count(),
                        msgpack: Box::new(m),
                    }),
                };
            }
            Format::by_name(path)
        }
    };
    let mut attempts = Vec::new();
    for format in order {
        match parse_bytes(&bytes, format) {
            Ok(events) => return Ok(Trace { format, events }),
            Err(e) => attempts.push(e),
        }
    }
    Err(Error::Unreadable {
        path: path.to_path_buf(),
        attempts,
    })
}

/// Parses a trace held in memory as raw bytes (text formats must be UTF-8).
pub fn parse_bytes(bytes: &[u8], format: Format) -> Result<Vec<JobEvent>> {
    match format {
        Format::TmioMsgpack => return non_empty(msgpack::parse(bytes)?, format),
        Format::MetricProxy => return non_empty(metric_proxy::parse(bytes)?, format),
        _ => {}
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text, format),
        Err(e) => Err(not_utf8(bytes, e, format)),
    }
}

/// The file at `path` as text; not UTF-8 is a parse error of `format` naming the line.
pub(crate) fn read_text(path: &Path, format: Format) -> Result<String> {
    String::from_utf8(read_bytes(path)?).map_err(|e| {
        let err = e.utf8_error();
        not_utf8(e.as_bytes(), err, format)
    })
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
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

/// Parses a trace held in memory. (A MessagePack trace given as text is decoded from its
/// bytes; [`parse_bytes`] takes any bytes.)
pub fn parse(text: &str, format: Format) -> Result<Vec<JobEvent>> {
    let events = match format {
        Format::Csv => parse_csv(text)?,
        Format::Jsonl => parse_jsonl(text)?,
        Format::Ftio => bandwidth::parse_ftio_json(text)?,
        Format::Tmio => bandwidth::parse_tmio_jsonl(text)?,
        Format::TmioJson => bandwidth::parse_tmio_json(text)?,
        Format::TmioMsgpack => msgpack::parse(text.as_bytes())?,
        Format::FtioTxt => bandwidth::parse_ftio_txt(text)?,
        Format::Gekko => bandwidth::parse_gekko_json(text)?,
        Format::Dxt => parse_dxt(text)?,
        Format::Recorder => recorder::parse(text)?,
        Format::MetricProxy => metric_proxy::parse(text.as_bytes())?,
    };
    non_empty(events, format)
}

fn non_empty(events: Vec<JobEvent>, format: Format) -> Result<Vec<JobEvent>> {
    if !events.is_empty() {
        return Ok(events);
    }
    Err(Error::Empty {
        format,
        detail: match format {
            Format::Csv => "no request after the header",
            Format::Jsonl => "no request line",
            Format::Ftio => "no sample with a positive bandwidth and duration",
            Format::Tmio | Format::TmioJson | Format::TmioMsgpack => {
                "no sample in read_sync, write_sync, read_async_t or write_async_t"
            }
            Format::FtioTxt => "no `key: [...]` line",
            Format::Gekko => "no request",
            Format::Dxt => "no X_POSIX or X_MPIIO record",
            Format::Recorder => {
                "no read, write, pread, pwrite, readv, writev, fread or fwrite call"
            }
            Format::MetricProxy => "no rise in the strace exporter's byte counters",
        }
        .into(),
    })
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

pub(crate) fn parse_err(format: Format, line: usize, message: impl Into<String>) -> Error {
    Error::Parse {
        format,
        line,
        message: message.into(),
    }
}

/// Largest time accepted, seconds (about 584 years: the range of `Nanos`).
const MAX_SECS: f64 = 1.8e10;

pub(crate) fn seconds(format: Format, line: usize, what: &str, v: f64) -> Result<Nanos> {
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

pub(crate) fn event(
    format: Format,
    line: usize,
    start: f64,
    end: f64,
    bytes: u64,
) -> Result<Event> {
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

pub(crate) fn non_comment_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
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
    let oi = find(&["op"]);
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
        let dir = match oi {
            Some(o) => direction(fields[o]).ok_or_else(|| {
                parse_err(
                    F,
                    n,
                    format!("op {:?} is not read, write, fsync or other", fields[o]),
                )
            })?,
            None => Direction::Unspecified,
        };
        out.push(JobEvent {
            job,
            event: ev,
            dir,
        });
    }
    Ok(out)
}

/// The direction an `op` field names (`read`/`r`, `write`/`w`, `fsync`, `other`), any case.
fn direction(op: &str) -> Option<Direction> {
    match op.trim().to_ascii_lowercase().as_str() {
        "read" | "r" => Some(Direction::Read),
        "write" | "w" => Some(Direction::Write),
        "fsync" | "other" => Some(Direction::Other),
        _ => None,
    }
}

#[derive(serde::Deserialize)]
struct JsonlRecord {
    start: f64,
    end: f64,
    bytes: u64,
    #[serde(default)]
    job: u64,
    #[serde(default)]
    op: Option<String>,
}

fn parse_jsonl(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Jsonl;
    let mut out = Vec::new();
    for (n, line) in non_comment_lines(text) {
        let r: JsonlRecord = serde_json::from_str(line)
            .map_err(|e| parse_err(F, n, format!("not a request record ({e})")))?;
        let dir = match &r.op {
            Some(op) => direction(op).ok_or_else(|| {
                parse_err(
                    F,
                    n,
                    format!("op {op:?} is not read, write, fsync or other"),
                )
            })?,
            None => Direction::Unspecified,
        };
        out.push(JobEvent {
            job: JobId(r.job),
            event: event(F, n, r.start, r.end, r.bytes)?,
            dir,
        });
    }
    Ok(out)
}

/// 1-based line of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
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
        let dir = if f[2] == "read" {
            Direction::Read
        } else {
            Direction::Write
        };
        if f[0] == "X_POSIX" {
            posix.push((ev, dir));
        } else {
            other.push((ev, dir));
        }
    }
    let chosen = if posix.is_empty() { other } else { posix };
    Ok(chosen
        .into_iter()
        .map(|(event, dir)| JobEvent { job, event, dir })
        .collect())
}

pub(crate) fn truncate(s: &str) -> String {
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
