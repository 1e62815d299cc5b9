//! The request trace: one CSV row per I/O request, the one schema that the server writes
//! (`iosets serve --trace`), `iosets detect` reads and `iosets replay` replays.
//!
//! Written with [`TraceWriter`], read with [`parse_requests`] / [`read_requests`], both through the
//! `csv` crate. `docs/trace-format.md` documents the format with an example.
//!
//! The header names the columns, in any order (names are case-insensitive); every value is an
//! integer in bytes or nanoseconds, except `op` and `path`:
//!
//! | column | required | meaning |
//! |---|---|---|
//! | `job` | yes | the job id |
//! | `op` | yes | `read`, `write`, `fsync` or `other` |
//! | `offset` | yes | byte offset in the file |
//! | `len` | yes | bytes asked for |
//! | `arrival_ns` | yes | when the request reached the scheduler, ns |
//! | `tag` | no | the client's request tag |
//! | `path` | no | the file, relative to the server's root; its file id is FNV-1a 64 of the path, as the server computes it (without a path: the job id) |
//! | `dispatch_ns` | no | when the scheduler dispatched it, ns; ≥ `arrival_ns` |
//! | `complete_ns` | no | when it completed, ns; ≥ `dispatch_ns` (or `arrival_ns`) |
//! | `errno` | no | 0: served; > 0: failed with that OS error |
//!
//! The writer writes every column, in the order of [`REQUEST_HEADER`]:
//! `job,tag,op,path,offset,len,arrival_ns,dispatch_ns,complete_ns,errno`.
//!
//! All times of one trace are on one clock whose origin is the writer's (the server's: its
//! scheduler's monotonic clock, zero at start). An optional column may be absent from the header
//! or left empty on a row. Lines starting with `#` are comments; blank lines are skipped.
//!
//! The reader refuses, never guesses: an unknown or repeated column, a missing required one, a
//! row with the wrong number of fields, a value that is not what its column holds (not a number,
//! negative, an unknown operation) and times out of order are each an [`Error::Parse`] naming the
//! line and the column; a trace without a row is [`Error::Empty`].

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use iosets_types::hash::fnv1a64;
use iosets_types::{FileId, JobId, Nanos, Op};

use crate::error::{Error, Result};
use crate::event::{Direction, Event, JobEvent};
use crate::trace::Format;

/// What a traced request did. The server's three data operations, plus `other` for anything a
/// hand-written trace wants replayed as a non-mergeable request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceOp {
    /// A read of `len` bytes at `offset`.
    Read,
    /// A write of `len` bytes at `offset`.
    Write,
    /// An fsync of the file (`offset` and `len` 0).
    Fsync,
    /// Anything else.
    Other,
}

impl TraceOp {
    /// Every operation's name, as written in the `op` column.
    pub const NAMES: &'static [&'static str] = &["read", "write", "fsync", "other"];

    /// The name written in the `op` column.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceOp::Read => "read",
            TraceOp::Write => "write",
            TraceOp::Fsync => "fsync",
            TraceOp::Other => "other",
        }
    }

    /// The scheduler's operation: an fsync is [`Op::Other`] and any other operation (metadata)
    /// [`Op::Meta`], as the server submits them.
    pub fn op(self) -> Op {
        match self {
            TraceOp::Read => Op::Read,
            TraceOp::Write => Op::Write,
            TraceOp::Fsync => Op::Other,
            TraceOp::Other => Op::Meta,
        }
    }
}

impl std::str::FromStr for TraceOp {
    type Err = String;

    /// An operation by its name, in any case.
    fn from_str(s: &str) -> std::result::Result<TraceOp, String> {
        [
            TraceOp::Read,
            TraceOp::Write,
            TraceOp::Fsync,
            TraceOp::Other,
        ]
        .into_iter()
        .find(|op| s.eq_ignore_ascii_case(op.as_str()))
        .ok_or_else(|| format!("unknown operation {s:?}: expected read, write, fsync or other"))
    }
}

impl std::fmt::Display for TraceOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of a request trace (see the [module docs](self) for the columns).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestRecord {
    /// `job`.
    pub job: JobId,
    /// `tag`.
    pub tag: Option<u64>,
    /// `op`.
    pub op: TraceOp,
    /// `path`.
    pub path: Option<String>,
    /// `offset`, bytes.
    pub offset: u64,
    /// `len`, bytes.
    pub len: u64,
    /// `arrival_ns`.
    pub arrival: Nanos,
    /// `dispatch_ns`.
    pub dispatch: Option<Nanos>,
    /// `complete_ns`.
    pub complete: Option<Nanos>,
    /// `errno`: `Some(0)` served, `Some(e)` failed with `e`, `None` not recorded.
    pub errno: Option<i32>,
}

impl RequestRecord {
    /// A request with only the required columns set.
    pub fn new(job: JobId, op: TraceOp, offset: u64, len: u64, arrival: Nanos) -> RequestRecord {
        RequestRecord {
            job,
            tag: None,
            op,
            path: None,
            offset,
            len,
            arrival,
            dispatch: None,
            complete: None,
            errno: None,
        }
    }

    /// The file id: FNV-1a 64 of `path` (the server's file id of that path), or without a path
    /// the job id (one file per job).
    pub fn file_id(&self) -> FileId {
        match &self.path {
            Some(p) => FileId(fnv1a64(p.as_bytes())),
            None => FileId(self.job.0),
        }
    }

    /// True when `errno` records a failure.
    pub fn failed(&self) -> bool {
        self.errno.is_some_and(|e| e != 0)
    }

    /// The request as the period detector sees it: from arrival to completion, `len` bytes (0
    /// if it failed: nothing moved). `None` without a completion time.
    pub fn event(&self) -> Option<Event> {
        let bytes = if self.failed() { 0 } else { self.len };
        self.complete
            .map(|complete| Event::new(self.arrival, complete, bytes))
    }
}

/// One column of the schema.
struct Column {
    name: &'static str,
    required: bool,
    /// What a value of the column is, for error messages.
    expected: &'static str,
}

const fn col(name: &'static str, required: bool, expected: &'static str) -> Column {
    Column {
        name,
        required,
        expected,
    }
}

/// The columns, in the order [`TraceWriter`] writes them (and [`Row`] declares its fields).
const COLUMNS: [Column; 10] = [
    col("job", true, "a job id (a whole number ≥ 0)"),
    col("tag", false, "a request tag (a whole number ≥ 0)"),
    col("op", true, "read, write, fsync or other"),
    col("path", false, "a path"),
    col("offset", true, "a byte offset (a whole number ≥ 0)"),
    col("len", true, "a length in bytes (a whole number ≥ 0)"),
    col(
        "arrival_ns",
        true,
        "a time in nanoseconds (a whole number ≥ 0)",
    ),
    col(
        "dispatch_ns",
        false,
        "a time in nanoseconds (a whole number ≥ 0)",
    ),
    col(
        "complete_ns",
        false,
        "a time in nanoseconds (a whole number ≥ 0)",
    ),
    col("errno", false, "0 (served) or an OS error number > 0"),
];

/// The header [`TraceWriter`] writes: every column, in its order.
pub const REQUEST_HEADER: &str =
    "job,tag,op,path,offset,len,arrival_ns,dispatch_ns,complete_ns,errno";

/// The required columns, for messages.
const REQUIRED: &str = "job,op,offset,len,arrival_ns";

/// A row as the `csv` crate sees it: the columns by name, raw types.
#[derive(serde::Serialize, serde::Deserialize)]
struct Row<'a> {
    job: u64,
    #[serde(default)]
    tag: Option<u64>,
    #[serde(borrow)]
    op: Cow<'a, str>,
    #[serde(default, borrow)]
    path: Option<Cow<'a, str>>,
    offset: u64,
    len: u64,
    arrival_ns: u64,
    #[serde(default)]
    dispatch_ns: Option<u64>,
    #[serde(default)]
    complete_ns: Option<u64>,
    #[serde(default)]
    errno: Option<i32>,
}

impl<'a> Row<'a> {
    fn of(r: &'a RequestRecord) -> Row<'a> {
        Row {
            job: r.job.0,
            tag: r.tag,
            op: Cow::Borrowed(r.op.as_str()),
            path: r.path.as_deref().map(Cow::Borrowed),
            offset: r.offset,
            len: r.len,
            arrival_ns: r.arrival.0,
            dispatch_ns: r.dispatch.map(|t| t.0),
            complete_ns: r.complete.map(|t| t.0),
            errno: r.errno,
        }
    }

    /// The record, after the checks no type does: a known operation, errno ≥ 0, times in order.
    fn into_record(self) -> std::result::Result<RequestRecord, String> {
        let op = self
            .op
            .parse::<TraceOp>()
            .map_err(|e| format!("column op: {e}"))?;
        if let Some(e) = self.errno.filter(|&e| e < 0) {
            return Err(format!(
                "column errno: {e} is negative: expected {}",
                COLUMNS[9].expected
            ));
        }
        if let Some(d) = self.dispatch_ns.filter(|&d| d < self.arrival_ns) {
            return Err(format!(
                "column dispatch_ns: {d} is before arrival_ns {}",
                self.arrival_ns
            ));
        }
        if let Some(c) = self.complete_ns {
            let (after, t) = match self.dispatch_ns {
                Some(d) => ("dispatch_ns", d),
                None => ("arrival_ns", self.arrival_ns),
            };
            if c < t {
                return Err(format!("column complete_ns: {c} is before {after} {t}"));
            }
        }
        Ok(RequestRecord {
            job: JobId(self.job),
            tag: self.tag,
            op,
            path: self.path.map(Cow::into_owned),
            offset: self.offset,
            len: self.len,
            arrival: Nanos(self.arrival_ns),
            dispatch: self.dispatch_ns.map(Nanos),
            complete: self.complete_ns.map(Nanos),
            errno: self.errno,
        })
    }
}

/// Writes a request trace: the header once, then one row per [`TraceWriter::write`].
///
/// Rows are buffered; [`TraceWriter::flush`] pushes them (and flushes `W`). Dropping the writer
/// flushes too, ignoring errors: call `flush` to see them.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    csv: csv::Writer<W>,
}

impl<W: Write> TraceWriter<W> {
    /// A writer that starts a trace: the header ([`REQUEST_HEADER`]) is written now.
    pub fn new(sink: W) -> std::io::Result<TraceWriter<W>> {
        let mut w = TraceWriter::append(sink);
        w.csv.write_record(COLUMNS.iter().map(|c| c.name))?;
        Ok(w)
    }

    /// A writer that starts a trace whose clock's zero is `unix_ns` (UNIX-epoch nanoseconds): a
    /// comment line [`CLOCK_ZERO`]`<unix_ns>` comes first, so traces of servers started at
    /// different times can be put on one time line ([`clock_zero`]); then the header.
    pub fn with_clock_zero(mut sink: W, unix_ns: u64) -> std::io::Result<TraceWriter<W>> {
        writeln!(sink, "{CLOCK_ZERO}{unix_ns}")?;
        TraceWriter::new(sink)
    }

    /// A writer that continues a trace whose header is already written.
    pub fn append(sink: W) -> TraceWriter<W> {
        TraceWriter {
            csv: csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(sink),
        }
    }

    /// Appends one row.
    pub fn write(&mut self, record: &RequestRecord) -> std::io::Result<()> {
        self.csv.serialize(Row::of(record))?;
        Ok(())
    }

    /// Writes out the buffered rows and flushes the sink.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.csv.flush()
    }

    /// Flushes and returns the sink.
    pub fn into_inner(self) -> std::io::Result<W> {
        self.csv.into_inner().map_err(|e| e.into_error())
    }
}

/// The comment that opens a trace written by [`TraceWriter::with_clock_zero`], followed by the
/// UNIX-epoch nanosecond at which the trace's clock reads zero.
pub const CLOCK_ZERO: &str = "# clock_zero_unix_ns=";

/// The UNIX-epoch nanosecond at which `text`'s clock reads zero, from a [`CLOCK_ZERO`] comment
/// before its header; `None` if there is none (or it does not parse).
pub fn clock_zero(text: &str) -> Option<u64> {
    text.lines()
        .map(str::trim)
        .take_while(|l| l.is_empty() || l.starts_with('#'))
        .find_map(|l| l.strip_prefix(CLOCK_ZERO))
        .and_then(|n| n.trim().parse().ok())
}

/// True if `text`'s header (its first record that is neither blank nor a `#` comment, found
/// as [`parse_requests`] finds it) names the `arrival_ns` column: the text is a request trace
/// rather than one of the older seconds dialects (`start,end,bytes` for `detect`,
/// `time_s,job,size` for `replay`).
pub fn is_request_trace(text: &str) -> bool {
    let mut records = reader(text).into_records();
    records
        .find(|r| !matches!(r, Ok(r) if is_blank(r)))
        .and_then(Result::ok)
        .is_some_and(|header| header.iter().any(|c| c.eq_ignore_ascii_case("arrival_ns")))
}

/// Reads a request trace held in memory.
///
/// # Errors
/// [`Error::Parse`] naming the line (and the column) of the first malformed line,
/// [`Error::Empty`] for a trace without a header or without a row.
pub fn parse_requests(text: &str) -> Result<Vec<RequestRecord>> {
    Ok(parse_lines(text)?.into_iter().map(|(_, r)| r).collect())
}

/// Reads the request trace at `path` (see [`parse_requests`]).
///
/// # Errors
/// Those of [`parse_requests`], [`Error::Io`] if the file cannot be read, and an
/// [`Error::Parse`] naming the line if it is not UTF-8 text.
pub fn read_requests(path: &Path) -> Result<Vec<RequestRecord>> {
    parse_requests(&crate::trace::read_text(path, Format::Csv)?)
}

/// The requests of a trace as the period detector's events (see [`RequestRecord::event`]); every
/// row needs `complete_ns`.
pub(crate) fn parse_events(text: &str) -> Result<Vec<JobEvent>> {
    let rows = parse_lines(text)?;
    rows.into_iter()
        .map(|(line, r)| {
            r.event()
                .map(|event| JobEvent {
                    job: r.job,
                    event,
                    dir: match r.op {
                        TraceOp::Read => Direction::Read,
                        TraceOp::Write => Direction::Write,
                        TraceOp::Fsync | TraceOp::Other => Direction::Other,
                    },
                })
                .ok_or_else(|| {
                    parse(
                        line,
                        "column complete_ns: empty, but detection needs each request's \
                         completion time"
                            .into(),
                    )
                })
        })
        .collect()
}

fn parse(line: usize, message: String) -> Error {
    Error::Parse {
        format: Format::Csv,
        line,
        message,
    }
}

/// The rows of `text` with their 1-based line numbers.
fn parse_lines(text: &str) -> Result<Vec<(usize, RequestRecord)>> {
    let mut reader = reader(text);
    let lines = Lines::new(text);
    let mut records = reader.records();
    let header = loop {
        match records.next() {
            None => {
                return Err(Error::Empty {
                    format: Format::Csv,
                    detail: format!("no header line (expected at least {REQUIRED})"),
                })
            }
            Some(Err(e)) => return Err(csv_error(&e, &lines)),
            Some(Ok(r)) if is_blank(&r) => continue,
            Some(Ok(r)) => break r,
        }
    };
    let header = check_header(&header, lines.of(header.position()))?;
    let mut out = Vec::new();
    for record in records {
        let record = record.map_err(|e| csv_error(&e, &lines))?;
        if is_blank(&record) {
            continue;
        }
        let line = lines.of(record.position());
        if record.len() != header.len() {
            return Err(parse(
                line,
                format!(
                    "{} fields where the header has {}",
                    record.len(),
                    header.len()
                ),
            ));
        }
        let row: Row<'_> = record
            .deserialize(Some(&header))
            .map_err(|e| parse(line, value_error(&e, &header, &record)))?;
        out.push((line, row.into_record().map_err(|m| parse(line, m))?));
    }
    if out.is_empty() {
        return Err(Error::Empty {
            format: Format::Csv,
            detail: "no request after the header".into(),
        });
    }
    Ok(out)
}

/// The CSV reader of a request trace: `#` comments, fields trimmed, rows of any length (checked
/// against the header by the caller, for a clearer message).
fn reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes())
}

fn is_blank(r: &csv::StringRecord) -> bool {
    r.len() == 1 && r[0].is_empty()
}

/// Line numbers of records. The `csv` crate's own line count skips `#` comment lines, and a
/// record's position is where the reader started looking for it, before the blank and comment
/// lines it skipped; so lines are counted here, from that byte offset, past those lines.
struct Lines<'a> {
    /// The text's lines, without their `\n`.
    lines: Vec<&'a str>,
    /// Byte offset of each line's start.
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let lines: Vec<&str> = text.split('\n').collect();
        let starts = lines
            .iter()
            .scan(0, |at, l| {
                let start = *at;
                *at += l.len() + 1;
                Some(start)
            })
            .collect();
        Lines { lines, starts }
    }

    /// The 1-based line of the record whose search began at `position` (line 1 without one).
    fn of(&self, position: Option<&csv::Position>) -> usize {
        let Some(p) = position else { return 1 };
        let byte = usize::try_from(p.byte()).unwrap_or(usize::MAX);
        let mut i = self
            .starts
            .partition_point(|&s| s <= byte)
            .saturating_sub(1);
        while i + 1 < self.lines.len() {
            let l = self.lines[i];
            if !(l.is_empty() || l == "\r" || l.starts_with('#')) {
                break;
            }
            i += 1;
        }
        i + 1
    }
}

/// The header, names lower-cased, after checking that every column is known, appears once, and
/// that the required ones are there.
fn check_header(header: &csv::StringRecord, line: usize) -> Result<csv::StringRecord> {
    let names: csv::StringRecord = header.iter().map(str::to_ascii_lowercase).collect();
    for (i, name) in names.iter().enumerate() {
        if !COLUMNS.iter().any(|c| c.name == name) {
            return Err(parse(
                line,
                format!(
                    "unknown column {:?} (a request trace has {REQUEST_HEADER}; an older \
                     dialect's header would be start,end,bytes[,job] or time_s,job,size)",
                    &header[i]
                ),
            ));
        }
        if names.iter().take(i).any(|n| n == name) {
            return Err(parse(
                line,
                format!("column {:?} appears twice in the header", &header[i]),
            ));
        }
    }
    if let Some(c) = COLUMNS
        .iter()
        .find(|c| c.required && !names.iter().any(|n| n == c.name))
    {
        return Err(parse(
            line,
            format!("missing required column {} (required: {REQUIRED})", c.name),
        ));
    }
    Ok(names)
}

/// The message for a value the `csv` crate could not turn into its column's type.
fn value_error(e: &csv::Error, header: &csv::StringRecord, record: &csv::StringRecord) -> String {
    let csv::ErrorKind::Deserialize { err: e, .. } = e.kind() else {
        return e.to_string();
    };
    let Some(i) = e.field().map(|i| i as usize) else {
        return e.to_string();
    };
    let (Some(name), Some(value)) = (header.get(i), record.get(i)) else {
        return e.to_string();
    };
    let expected = COLUMNS
        .iter()
        .find(|c| c.name == name)
        .map_or("", |c| c.expected);
    let overflow = matches!(
        e.kind(),
        csv::DeserializeErrorKind::ParseInt(p)
            if matches!(p.kind(), std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow)
    );
    if value.is_empty() {
        format!("column {name}: empty, expected {expected}")
    } else if value.starts_with('-') {
        format!("column {name}: {value} is negative: expected {expected}")
    } else if overflow {
        format!("column {name}: {value} is out of range: expected {expected}")
    } else {
        format!("column {name}: {value:?} is not {expected}")
    }
}

/// A `csv` error outside a value (the reader is flexible and reads a `&str`, so this is not
/// expected): the line where it stopped and the crate's message.
fn csv_error(e: &csv::Error, lines: &Lines<'_>) -> Error {
    parse(lines.of(e.position()), e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_constant_lists_the_columns_in_order() {
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names.join(","), REQUEST_HEADER);
        let required: Vec<&str> = COLUMNS
            .iter()
            .filter(|c| c.required)
            .map(|c| c.name)
            .collect();
        assert_eq!(required.join(","), REQUIRED);
    }

    #[test]
    fn the_clock_zero_comment_round_trips_and_is_skipped_by_readers() {
        let mut w = TraceWriter::with_clock_zero(Vec::new(), 1_764_000_000_000_000_123).unwrap();
        w.write(&RequestRecord::new(
            JobId(3),
            TraceOp::Write,
            0,
            4096,
            Nanos(5),
        ))
        .unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(clock_zero(&text), Some(1_764_000_000_000_000_123));
        assert!(is_request_trace(&text));
        let rows = parse_requests(&text).unwrap();
        assert_eq!((rows.len(), rows[0].job, rows[0].len), (1, JobId(3), 4096));
        assert_eq!(clock_zero("job,op,offset,len,arrival_ns\n"), None);
        // Only comments before the header count.
        assert_eq!(
            clock_zero("job,op,offset,len,arrival_ns\n# clock_zero_unix_ns=5\n"),
            None
        );
    }

    #[test]
    fn op_names_read_in_any_case() {
        for (op, name) in [
            TraceOp::Read,
            TraceOp::Write,
            TraceOp::Fsync,
            TraceOp::Other,
        ]
        .into_iter()
        .zip(TraceOp::NAMES)
        {
            assert_eq!(op.as_str(), *name);
            let upper = name.to_ascii_uppercase();
            let text = format!("job,op,offset,len,arrival_ns\n1,{name},0,0,0\n1,{upper},0,0,0\n");
            let ops: Vec<TraceOp> = parse_requests(&text)
                .unwrap()
                .iter()
                .map(|r| r.op)
                .collect();
            assert_eq!(ops, [op, op]);
        }
    }

    #[test]
    fn file_id_is_the_path_hash_or_the_job() {
        let mut r = RequestRecord::new(JobId(7), TraceOp::Write, 0, 1, Nanos(0));
        assert_eq!(r.file_id(), FileId(7));
        r.path = Some("a/b".into());
        assert_eq!(r.file_id(), FileId(fnv1a64(b"a/b")));
    }
}
