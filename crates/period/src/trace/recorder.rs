//! Recorder's traces as `recorder2text` prints them: the folder `<trace>/_text` of one
//! `<rank>.txt` file per rank, one function call a line. This is what FTIO reads for Recorder
//! (its `ftio/parse/recorder_reader.py`, given the `_text` folder); Recorder's binary per-rank
//! logs are not read here: print them with `recorder2text <trace folder>` first.
//!
//! A line is (Recorder's `tools/recorder2text.c`)
//!
//! - `tstart tend function level type ( arg arg … )` since Recorder 2.3, `level` the call depth
//!   and `type` the layer (0 POSIX, 1 MPI-IO, 2 MPI, 3 HDF5, 4 user function);
//! - `tstart tend result function ( arg arg … )` in Recorder 2.1 and 2.2,
//!
//! times in seconds since the trace started. The bytes of a call are in the arguments Recorder
//! records for it (`lib/recorder-posix.c`; the first argument is a file name or descriptor):
//!
//! | function | arguments | bytes |
//! |---|---|---|
//! | `read`, `write` | `file buf count` | `count` |
//! | `pread`, `pwrite`, `pread64`, `pwrite64` | `file buf count offset` | `count` |
//! | `readv`, `writev` | `file total iovcnt` | `total` (Recorder sums the `iov_len`s) |
//! | `fread`, `fwrite` | `ptr size nmemb stream` | `size × nmemb` |
//!
//! These are the events, from `tstart` to `tend`, with their direction. Every other call
//! (`open`, `lseek`, `fsync`, MPI, MPI-IO, HDF5, user functions) is checked for the line's
//! shape and skipped: an MPI-IO or HDF5 call reaches the file as POSIX calls, which are counted
//! (counting both would count the bytes twice), and its byte count would need its datatype's
//! size, which the trace does not give. FTIO itself keeps only the lines of `read` and `write`
//! and takes the last argument as their bytes, so on traces that use only those two it sees
//! the same events.
//!
//! All ranks are one application: every event is job 0. A directory given to
//! [`read_trace`](crate::trace::read_trace) is read with [`read_dir`].

use std::path::{Path, PathBuf};

use iosets_types::JobId;

use crate::error::{Error, Result};
use crate::event::{Direction, Event, JobEvent};
use crate::trace::{event, non_comment_lines, parse_err, read_text, truncate, Format, Trace};

const F: Format = Format::Recorder;

/// The events of one rank's text file.
pub(crate) fn parse(text: &str) -> Result<Vec<JobEvent>> {
    let mut out = Vec::new();
    for (n, line) in non_comment_lines(text) {
        if let Some((event, dir)) = record(n, line)? {
            out.push(JobEvent {
                job: JobId(0),
                event,
                dir,
            });
        }
    }
    Ok(out)
}

/// True if `line` has the shape of a `recorder2text` record: two numbers, a function, a
/// parenthesised argument list (for [`Format::sniff`]).
pub(crate) fn looks_like(line: &str) -> bool {
    let Some((head, rest)) = line.split_once('(') else {
        return false;
    };
    let head: Vec<&str> = head.split_whitespace().collect();
    rest.trim_end().ends_with(')')
        && function(&head).is_some()
        && head[..2].iter().all(|t| t.parse::<f64>().is_ok())
}

/// The function's name in a record's head: `tstart tend function level type` (Recorder ≥ 2.3)
/// or `tstart tend result function` (2.1, 2.2).
fn function<'a>(head: &[&'a str]) -> Option<&'a str> {
    let int = |s: &str| s.parse::<i64>().is_ok();
    match *head {
        [_, _, f, level, kind] if !int(f) && int(level) && int(kind) => Some(f),
        [_, _, result, f] if int(result) && !int(f) => Some(f),
        _ => None,
    }
}

/// One line: its event and direction if it moves data, `None` for any other call.
fn record(n: usize, line: &str) -> Result<Option<(Event, Direction)>> {
    let shape = "a recorder2text record is `tstart tend function level type ( args )` \
                 (Recorder 2.3 and later) or `tstart tend result function ( args )` (2.1, 2.2)";
    let Some((head, rest)) = line.split_once('(') else {
        return Err(parse_err(
            F,
            n,
            format!(
                "no argument list `( … )`: {shape}; found {:?}",
                truncate(line)
            ),
        ));
    };
    let Some(inner) = rest.trim_end().strip_suffix(')') else {
        return Err(parse_err(
            F,
            n,
            format!(
                "the argument list is not closed by `)` at the end of the line: {shape}; \
                 found {:?}",
                truncate(line)
            ),
        ));
    };
    let head: Vec<&str> = head.split_whitespace().collect();
    let Some(func) = function(&head) else {
        return Err(parse_err(
            F,
            n,
            format!(
                "{shape}; found {:?} before the arguments",
                truncate(&head.join(" "))
            ),
        ));
    };
    let time = |s: &str, what: &str| -> Result<f64> {
        s.parse::<f64>()
            .map_err(|_| parse_err(F, n, format!("{what} {s:?} is not a number of seconds")))
    };
    let span = event(F, n, time(head[0], "start")?, time(head[1], "end")?, 0)?;
    let Some((dir, bytes)) = transfer(n, func, inner)? else {
        return Ok(None);
    };
    Ok(Some((Event::new(span.start, span.end, bytes), dir)))
}

/// Where a call's byte count is among Recorder's arguments.
enum Bytes {
    /// The argument at this index.
    At(usize),
    /// The product of the arguments at these two indices (`fread`'s `size × nmemb`).
    Product(usize, usize),
}

/// The direction and bytes of a data-moving call, `None` for any other.
fn transfer(n: usize, func: &str, args: &str) -> Result<Option<(Direction, u64)>> {
    use Direction::{Read, Write};
    let (dir, signature, bytes) = match func {
        "read" => (Read, "read(file, buf, count)", Bytes::At(2)),
        "write" => (Write, "write(file, buf, count)", Bytes::At(2)),
        "pread" | "pread64" => (Read, "pread(file, buf, count, offset)", Bytes::At(2)),
        "pwrite" | "pwrite64" => (Write, "pwrite(file, buf, count, offset)", Bytes::At(2)),
        "readv" => (Read, "readv(file, total, iovcnt)", Bytes::At(1)),
        "writev" => (Write, "writev(file, total, iovcnt)", Bytes::At(1)),
        "fread" => (
            Read,
            "fread(ptr, size, nmemb, stream)",
            Bytes::Product(1, 2),
        ),
        "fwrite" => (
            Write,
            "fwrite(ptr, size, nmemb, stream)",
            Bytes::Product(1, 2),
        ),
        _ => return Ok(None),
    };
    let args: Vec<&str> = args.split_whitespace().collect();
    let want = signature.matches(',').count() + 1;
    if args.len() != want {
        return Err(parse_err(
            F,
            n,
            format!(
                "{func} has {want} arguments in a Recorder trace ({signature}), this record {}",
                args.len()
            ),
        ));
    }
    let name = |i: usize| {
        signature
            .split(['(', ',', ')'])
            .nth(i + 1)
            .unwrap_or("")
            .trim()
    };
    let int = |i: usize| -> Result<u64> {
        args[i].parse::<u64>().map_err(|_| {
            parse_err(
                F,
                n,
                format!(
                    "{func}: {} {:?} is not a whole number ≥ 0",
                    name(i),
                    args[i]
                ),
            )
        })
    };
    let bytes = match bytes {
        Bytes::At(i) => int(i)?,
        Bytes::Product(i, j) => int(i)?.checked_mul(int(j)?).ok_or_else(|| {
            parse_err(
                F,
                n,
                format!("{func}: size × nmemb ({} × {}) overflows", args[i], args[j]),
            )
        })?,
    };
    Ok(Some((dir, bytes)))
}

/// Reads a `recorder2text` folder: every `<rank>.txt` file directly in `dir`, in rank order;
/// if there is none, the same in `dir/_text` (so that the Recorder trace folder itself can be
/// named). Other entries are ignored. A directory is only ever read as [`Format::Recorder`]:
/// naming another `format` is an [`Error::Directory`].
///
/// # Errors
/// [`Error::Io`] if the directory or a file cannot be read; [`Error::Unreadable`] naming the
/// rank file whose line is malformed (its one attempt an [`Error::Parse`] with the line), or
/// naming `dir` with an [`Error::Empty`] if there is no rank file or no read or write in them.
pub fn read_dir(dir: &Path, format: Option<Format>) -> Result<Trace> {
    if let Some(other) = format.filter(|&f| f != F) {
        return Err(Error::Directory {
            path: dir.to_path_buf(),
            format: other,
        });
    }
    let mut files = rank_files(dir)?;
    let text_dir = dir.join("_text");
    if files.is_empty() && text_dir.is_dir() {
        files = rank_files(&text_dir)?;
    }
    let empty = |detail: String| Error::Unreadable {
        path: dir.to_path_buf(),
        attempts: vec![Error::Empty { format: F, detail }],
    };
    if files.is_empty() {
        return Err(empty(
            "no <rank>.txt file in the directory nor in its _text folder (a directory is read \
             as recorder2text's output: <trace folder>/_text/<rank>.txt)"
                .into(),
        ));
    }
    let mut events = Vec::new();
    for file in &files {
        let rank = read_text(file, F).and_then(|text| parse(&text));
        match rank {
            Ok(e) => events.extend(e),
            Err(e @ Error::Io { .. }) => return Err(e),
            Err(e) => {
                return Err(Error::Unreadable {
                    path: file.clone(),
                    attempts: vec![e],
                })
            }
        }
    }
    if events.is_empty() {
        return Err(empty(format!(
            "no read or write call in its {} rank file(s)",
            files.len()
        )));
    }
    Ok(Trace { format: F, events })
}

/// The `<digits>.txt` files directly in `dir`, by rank (`recorder2text` pads the numbers with
/// zeros since 2.3, not before).
fn rank_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |error| Error::Io {
        path: dir.to_path_buf(),
        error,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let is_rank = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".txt"))
            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()));
        if is_rank && path.is_file() {
            files.push(path);
        }
    }
    files.sort_by_cached_key(|p| {
        let rank = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .trim_start_matches('0')
            .to_string();
        (rank.len(), rank)
    });
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_dialects_give_the_same_event() {
        let new = parse("1.500000 1.750000 write 0 0 ( /tmp/f %p 4096 )\n").unwrap();
        let old = parse("1.500000 1.750000 4096 write ( 3 0x7ffd 4096 )\n").unwrap();
        assert_eq!(new, old);
        assert_eq!(new[0].event, Event::from_secs(1.5, 1.75, 4096));
        assert_eq!(new[0].dir, Direction::Write);
    }

    #[test]
    fn each_call_takes_its_bytes_from_its_argument() {
        let text = "\
0.1 0.2 pread64 0 0 ( f %p 10 4096 )
0.1 0.2 writev 0 0 ( f 300 3 )
0.1 0.2 fread 0 0 ( %p 8 5 f )
0.1 0.2 lseek 0 0 ( f 0 0 )
0.1 0.2 MPI_File_write_at 0 1 ( 0x1 0 %p 4 MPI_INT [0_0_0] )
";
        let ev = parse(text).unwrap();
        let got: Vec<(u64, Direction)> = ev.iter().map(|e| (e.event.bytes, e.dir)).collect();
        assert_eq!(
            got,
            [
                (10, Direction::Read),
                (300, Direction::Write),
                (40, Direction::Read)
            ]
        );
    }

    #[test]
    fn sniffing_needs_the_whole_shape() {
        assert!(looks_like("0.1 0.2 open 0 0 ( f 0 )"));
        assert!(looks_like("0.1 0.2 -1 open ( f 0 )"));
        assert!(!looks_like("0.1 0.2 open 0 0 ( f 0"));
        assert!(!looks_like("a b open 0 0 ( )"));
        assert!(!looks_like("start,end,bytes (s)"));
    }
}
