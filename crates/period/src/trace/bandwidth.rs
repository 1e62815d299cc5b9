//! The bandwidth records of FTIO and TMIO (JSON, JSON Lines) and the per-request arrays of
//! GekkoFS's daemon (JSON) and FTIO's text pattern.
//!
//! TMIO and FTIO's custom JSON describe I/O in a `bandwidth` object at one of three levels
//! (FTIO's `ftio/parse/bandwidth.py`); the most detailed one present is used:
//!
//! - per request: `b_ind` (bytes/s) from `t_ind_s` to `t_ind_e` (s);
//! - per rank and phase: `b_rank_avr` (or `b_rank_sum`) from `t_rank_s` to `t_rank_e` (without
//!   `t_rank_e`, a phase ends where the next starts, as FTIO reads it);
//! - per application: `b_overlap_avr` (or `b_overlap_sum`) from `t_overlap[i]` to
//!   `t_overlap[i + 1]`.
//!
//! Each `bandwidth` sits in a mode section: `read_sync`, `write_sync`, `read_async_t`,
//! `write_async_t` (FTIO's custom JSON may also say `read_async` / `write_async`). The
//! `*_async_b` sections are the bandwidth an asynchronous request *required*, not what moved,
//! and are skipped, as is `io_time`. A value TMIO could not compute is printed `NaN` (not JSON):
//! it is read as a missing sample and skipped.

use std::borrow::Cow;
use std::collections::BTreeMap;

use iosets_types::JobId;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::event::{Direction, JobEvent};
use crate::trace::{event, line_of, non_comment_lines, parse_err, seconds, truncate, Format};

/// Mode sections read, with the direction of their bytes.
const MODES: [(&str, Direction); 6] = [
    ("read_sync", Direction::Read),
    ("write_sync", Direction::Write),
    ("read_async_t", Direction::Read),
    ("write_async_t", Direction::Write),
    ("read_async", Direction::Read),
    ("write_async", Direction::Write),
];

/// Keys of a TMIO record that carry no transfer.
const SKIPPED: [&str; 3] = ["read_async_b", "write_async_b", "io_time"];

/// One MiB, bytes.
const MIB: f64 = 1_048_576.0;

/// `text` with every `NaN` outside a string turned into `null` (TMIO prints `NaN` for a value
/// it skipped; JSON has no NaN).
fn nan_to_null(text: &str) -> Cow<'_, str> {
    if !text.contains("NaN") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if rest.starts_with("NaN") {
            // No newline is added or removed: line numbers stay right.
            out.push_str("null");
            rest = &rest[3..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// Where errors point: the line of a key in the document (or a fixed line for JSON Lines).
struct Locator<'a> {
    text: &'a str,
    /// Fixed line, for a JSON Lines record.
    line: Option<usize>,
}

impl Locator<'_> {
    fn at(&self, key: &str) -> usize {
        self.line.unwrap_or_else(|| {
            self.text
                .find(&format!("\"{key}\""))
                .map_or(1, |o| line_of(self.text, o))
        })
    }
}

/// A numeric array; `null` entries (TMIO's `NaN`) are `None`.
fn samples(f: Format, line: usize, what: &str, v: &Value) -> Result<Vec<Option<f64>>> {
    let Some(a) = v.as_array() else {
        return Err(parse_err(f, line, format!("{what} is not an array")));
    };
    a.iter()
        .enumerate()
        .map(|(i, x)| match x {
            Value::Null => Ok(None),
            x => x
                .as_f64()
                .map(Some)
                .ok_or_else(|| parse_err(f, line, format!("{what}[{i}] = {x} is not a number"))),
        })
        .collect()
}

fn bandwidth_ok(f: Format, line: usize, what: &str, i: usize, b: f64) -> Result<()> {
    if b.is_finite() && b >= 0.0 {
        Ok(())
    } else {
        Err(parse_err(
            f,
            line,
            format!("{what}[{i}] = {b} is not a bandwidth ≥ 0 (bytes/s)"),
        ))
    }
}

fn first_key<'a>(
    obj: &'a Map<String, Value>,
    keys: &[&'static str],
) -> Option<(&'static str, &'a Value)> {
    keys.iter().find_map(|&k| obj.get(k).map(|v| (k, v)))
}

/// The events of one `bandwidth` object.
fn bandwidth_events(
    f: Format,
    loc: &Locator<'_>,
    section: &str,
    bw: &Map<String, Value>,
    dir: Direction,
    job: JobId,
    out: &mut Vec<JobEvent>,
) -> Result<()> {
    let name = |k: &str| {
        if section.is_empty() {
            k.to_string()
        } else {
            format!("{section}.{k}")
        }
    };
    let push = |out: &mut Vec<JobEvent>, line: usize, s: f64, e: f64, b: f64| -> Result<()> {
        let ev = event(f, line, s, e, 0)?;
        let bytes = (b * (e - s)).round().min(u64::MAX as f64) as u64;
        out.push(JobEvent {
            job,
            event: crate::event::Event { bytes, ..ev },
            dir,
        });
        Ok(())
    };
    // Per request, then per rank: intervals.
    for (bk, sk, ek) in [
        (&["b_ind"][..], "t_ind_s", "t_ind_e"),
        (&["b_rank_avr", "b_rank_sum"][..], "t_rank_s", "t_rank_e"),
    ] {
        let Some((bk, bv)) = first_key(bw, bk) else {
            continue;
        };
        let line = loc.at(bk);
        let b = samples(f, line, &name(bk), bv)?;
        let Some(sv) = bw.get(sk) else {
            return Err(parse_err(
                f,
                line,
                format!("{} without {}", name(bk), name(sk)),
            ));
        };
        let s = samples(f, line, &name(sk), sv)?;
        let e = match bw.get(ek) {
            Some(ev) if ev.as_array().is_some_and(|a| !a.is_empty()) || b.is_empty() => {
                samples(f, line, &name(ek), ev)?
            }
            // FTIO: without end times a phase ends where the next one starts.
            _ => s.iter().skip(1).copied().chain(s.last().copied()).collect(),
        };
        if b.len() != s.len() || b.len() != e.len() {
            return Err(parse_err(
                f,
                line,
                format!(
                    "{} has {} values, {} {} and {} {}",
                    name(bk),
                    b.len(),
                    name(sk),
                    s.len(),
                    name(ek),
                    e.len()
                ),
            ));
        }
        for i in 0..b.len() {
            let (Some(bi), Some(si), Some(ei)) = (b[i], s[i], e[i]) else {
                continue;
            };
            bandwidth_ok(f, line, &name(bk), i, bi)?;
            push(out, line, si, ei, bi)?;
        }
        return Ok(());
    }
    // Per application: steps.
    if let Some((bk, bv)) = first_key(bw, &["b_overlap_avr", "b_overlap_sum", "b"]) {
        let tk = if bk == "b" { "t" } else { "t_overlap" };
        let line = loc.at(bk);
        let b = samples(f, line, &name(bk), bv)?;
        let Some(tv) = bw.get(tk) else {
            return Err(parse_err(
                f,
                line,
                format!("{} without {}", name(bk), name(tk)),
            ));
        };
        let tline = loc.at(tk);
        let t = samples(f, tline, &name(tk), tv)?;
        if t.len() != b.len() {
            return Err(parse_err(
                f,
                line,
                format!(
                    "{} has {} samples but {} has {}",
                    name(tk),
                    t.len(),
                    name(bk),
                    b.len()
                ),
            ));
        }
        let mut prev: Option<(usize, f64)> = None;
        for i in 0..t.len() {
            let Some(ti) = t[i] else { continue };
            seconds(f, tline, &format!("{}[{i}] =", name(tk)), ti)?;
            if let Some((j, tj)) = prev {
                if ti < tj {
                    return Err(parse_err(
                        f,
                        tline,
                        format!("{tk}[{i}] = {ti} is before {tk}[{j}] = {tj}"),
                    ));
                }
            }
            if let Some(bi) = b[i] {
                bandwidth_ok(f, line, &name(bk), i, bi)?;
            }
            prev = Some((i, ti));
        }
        let mut i = 0;
        while i + 1 < t.len() {
            if let (Some(t0), Some(t1), Some(bi)) = (t[i], t[i + 1], b[i]) {
                if (bi * (t1 - t0)).round() >= 1.0 {
                    push(out, tline, t0, t1, bi)?;
                }
            }
            i += 1;
        }
        return Ok(());
    }
    Ok(())
}

/// The events of one JSON object holding mode sections; `Ok(false)` if it holds none.
fn sections(
    f: Format,
    loc: &Locator<'_>,
    obj: &Map<String, Value>,
    job: JobId,
    out: &mut Vec<JobEvent>,
) -> Result<bool> {
    let mut any = false;
    for (mode, dir) in MODES {
        let Some(section) = obj.get(mode) else {
            continue;
        };
        any = true;
        let line = loc.at(mode);
        let Some(bw) = section.get("bandwidth") else {
            return Err(parse_err(
                f,
                line,
                format!("{mode} has no \"bandwidth\" object"),
            ));
        };
        let Some(bw) = bw.as_object() else {
            return Err(parse_err(
                f,
                line,
                format!("{mode}.bandwidth is not an object"),
            ));
        };
        bandwidth_events(f, loc, mode, bw, dir, job, out)?;
    }
    Ok(any || SKIPPED.iter().any(|k| obj.contains_key(*k)))
}

fn json_doc(f: Format, text: &str) -> Result<(Cow<'_, str>, Map<String, Value>)> {
    if text.trim().is_empty() {
        return Err(Error::Empty {
            format: f,
            detail: "the text is empty".into(),
        });
    }
    let text = nan_to_null(text);
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| parse_err(f, e.line().max(1), format!("not JSON ({e})")))?;
    let Value::Object(obj) = doc else {
        return Err(parse_err(f, 1, "expected a JSON object { ... }"));
    };
    Ok((text, obj))
}

fn job_of(f: Format, loc: &Locator<'_>, obj: &Map<String, Value>) -> Result<JobId> {
    match obj.get("job") {
        None => Ok(JobId(0)),
        Some(j) => j.as_u64().map(JobId).ok_or_else(|| {
            parse_err(
                f,
                loc.at("job"),
                format!("job {j} is not a whole number ≥ 0"),
            )
        }),
    }
}

/// FTIO's custom JSON: mode sections, a bare `bandwidth` object, its fields at the top level,
/// or (FTIO's minimal form) one `b…` array with one `t…` array (application level) or two
/// (`…s`, `…e`: rank level). An optional `"job"` names the job (an iosets addition).
pub(crate) fn parse_ftio_json(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Ftio;
    let (text, obj) = json_doc(F, text)?;
    let loc = Locator {
        text: &text,
        line: None,
    };
    let job = job_of(F, &loc, &obj)?;
    let mut out = Vec::new();
    if sections(F, &loc, &obj, job, &mut out)? {
        return Ok(out);
    }
    let dir = Direction::Unspecified;
    if let Some(bw) = obj.get("bandwidth") {
        let Some(bw) = bw.as_object() else {
            return Err(parse_err(
                F,
                loc.at("bandwidth"),
                "\"bandwidth\" is not an object",
            ));
        };
        bandwidth_events(F, &loc, "", bw, dir, job, &mut out)?;
        return Ok(out);
    }
    let known = [
        "b_ind",
        "b_rank_avr",
        "b_rank_sum",
        "b_overlap_avr",
        "b_overlap_sum",
        "b",
    ];
    if known.iter().any(|k| obj.contains_key(*k)) {
        bandwidth_events(F, &loc, "", &obj, dir, job, &mut out)?;
        return Ok(out);
    }
    // FTIO's last resort: the one key starting with b, and one or two starting with t.
    let bs: Vec<&String> = obj.keys().filter(|k| k.starts_with('b')).collect();
    let ts: Vec<&String> = obj.keys().filter(|k| k.starts_with('t')).collect();
    let mut bw = Map::new();
    match (bs.as_slice(), ts.as_slice()) {
        ([b], [t]) => {
            bw.insert("b".into(), obj[*b].clone());
            bw.insert("t".into(), obj[*t].clone());
        }
        ([b], [t1, t2]) => {
            let (s, e) = if t1.ends_with('s') {
                (t1, t2)
            } else {
                (t2, t1)
            };
            if !(s.ends_with('s') && e.ends_with('e')) {
                return Err(no_bandwidth(F));
            }
            bw.insert("b_rank_avr".into(), obj[*b].clone());
            bw.insert("t_rank_s".into(), obj[*s].clone());
            bw.insert("t_rank_e".into(), obj[*e].clone());
        }
        _ => return Err(no_bandwidth(F)),
    }
    bandwidth_events(F, &loc, "", &bw, dir, job, &mut out)?;
    Ok(out)
}

fn no_bandwidth(f: Format) -> Error {
    parse_err(
        f,
        1,
        "no bandwidth: expected a mode section (read_sync, write_sync, read_async_t, \
         write_async_t), a \"bandwidth\" object, rank-level b_rank_avr/t_rank_s/t_rank_e, \
         application-level b_overlap_avr/t_overlap, or \"b\" and \"t\" arrays",
    )
}

/// TMIO's JSON (offline mode, `<ranks>.json`): one object with the sections `read_sync`,
/// `read_async_t`, `read_async_b`, `write_async_t`, `write_async_b`, `write_sync`, `io_time`.
pub(crate) fn parse_tmio_json(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::TmioJson;
    let (text, obj) = json_doc(F, text)?;
    let loc = Locator {
        text: &text,
        line: None,
    };
    let mut out = Vec::new();
    if !sections(F, &loc, &obj, JobId(0), &mut out)? {
        return Err(parse_err(
            F,
            1,
            "no TMIO section (read_sync, write_sync, read_async_t, write_async_t, io_time)",
        ));
    }
    Ok(out)
}

/// TMIO's JSON Lines (online mode, `<ranks>.jsonl`): per flush seven lines, each an object
/// with one of the sections of [`parse_tmio_json`]; the flushes' samples add up.
pub(crate) fn parse_tmio_jsonl(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Tmio;
    let mut out = Vec::new();
    for (n, line) in non_comment_lines(text) {
        let line = nan_to_null(line);
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| parse_err(F, n, format!("not a JSON object ({e})")))?;
        let Value::Object(obj) = v else {
            return Err(parse_err(F, n, "not a JSON object"));
        };
        let loc = Locator {
            text: &line,
            line: Some(n),
        };
        if !sections(F, &loc, &obj, JobId(0), &mut out)? {
            let keys: Vec<&str> = obj.keys().map(String::as_str).take(4).collect();
            return Err(parse_err(
                F,
                n,
                format!(
                    "no TMIO section (read_sync, write_sync, read_async_t, write_async_t, \
                     io_time) in an object with keys {keys:?}"
                ),
            ));
        }
    }
    Ok(out)
}

/// A named numeric array of a request-array format, and the line it is on.
struct Column {
    line: usize,
    values: Vec<f64>,
}

/// Requests from GekkoFS-style arrays: `start_t_micro`/`end_t_micro` (µs) and `req_size`
/// (bytes) or `avg_thruput_mib` / `avg_throughput_mib` (MiB/s).
fn requests(f: Format, cols: &BTreeMap<String, Column>, dir: Direction) -> Result<Vec<JobEvent>> {
    let find = |pred: &dyn Fn(&str) -> bool| cols.iter().find(|(k, _)| pred(k));
    let (Some((_, start)), Some((_, end))) = (
        find(&|k| k.contains("start_t_micro")),
        find(&|k| k.contains("end_t_micro")),
    ) else {
        return Err(parse_err(
            f,
            1,
            "missing start_t_micro or end_t_micro (each request's start and end, µs)",
        ));
    };
    let size = find(&|k| k.contains("req_size"));
    let thr = find(&|k| k.starts_with("avg_thr"));
    if size.is_none() && thr.is_none() {
        return Err(parse_err(
            f,
            1,
            "missing req_size (bytes) or avg_thruput_mib (MiB/s): nothing says how many bytes \
             each request moved",
        ));
    }
    let n = start.values.len();
    for (k, c) in [
        ("end_t_micro", Some(end)),
        ("req_size", size.map(|s| s.1)),
        ("avg_thruput_mib", thr.map(|t| t.1)),
    ] {
        if let Some(c) = c {
            if c.values.len() != n {
                return Err(parse_err(
                    f,
                    c.line,
                    format!(
                        "{k} has {} values but start_t_micro has {n}",
                        c.values.len()
                    ),
                ));
            }
        }
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (s, e) = (start.values[i] * 1e-6, end.values[i] * 1e-6);
        let line = end.line.max(start.line);
        let ev = event(f, line, s, e, 0)?;
        let bytes = match (size, thr) {
            (Some((_, c)), _) => {
                let b = c.values[i];
                if !(b.is_finite() && b >= 0.0) {
                    return Err(parse_err(
                        f,
                        c.line,
                        format!("req_size[{i}] = {b} is not a byte count ≥ 0"),
                    ));
                }
                b
            }
            (None, Some((_, c))) => {
                bandwidth_ok(f, c.line, "avg_thruput_mib", i, c.values[i])?;
                c.values[i] * MIB * (e - s)
            }
            (None, None) => unreachable!("checked above"),
        };
        out.push(JobEvent {
            job: JobId(0),
            event: crate::event::Event {
                bytes: bytes.round().min(u64::MAX as f64) as u64,
                ..ev
            },
            dir,
        });
    }
    Ok(out)
}

/// GekkoFS's daemon JSON (the files FTIO reads in `ftio/api/gekkoFs`): one object with
/// `avg_thruput_mib`, `start_t_micro`, `end_t_micro`, `req_size`, `hostname`, `pid`,
/// `total_bytes`, `total_iops` (and optionally `io_type`: `w` or `r`). Times are microseconds:
/// the shipped examples' `req_size / (end - start)` is `avg_thruput_mib` only in µs.
pub(crate) fn parse_gekko_json(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::Gekko;
    let (text, obj) = json_doc(F, text)?;
    let loc = Locator {
        text: &text,
        line: None,
    };
    let mut cols = BTreeMap::new();
    for (k, v) in &obj {
        if v.is_array() {
            let line = loc.at(k);
            let values = samples(F, line, k, v)?
                .into_iter()
                .enumerate()
                .map(|(i, x)| x.ok_or_else(|| parse_err(F, line, format!("{k}[{i}] is null"))))
                .collect::<Result<Vec<f64>>>()?;
            cols.insert(k.clone(), Column { line, values });
        }
    }
    let dir = match obj.get("io_type").and_then(Value::as_str) {
        Some("w" | "write") => Direction::Write,
        Some("r" | "read") => Direction::Read,
        _ => Direction::Unspecified,
    };
    requests(F, &cols, dir)
}

/// FTIO's documented text pattern (`ftio/parse/custom_patterns.py`, `examples/custom/txt`):
/// `key: value` lines, arrays in brackets, e.g. `start_t_micro: [0500,0000,10500]`. The
/// columns are those of [`parse_gekko_json`].
pub(crate) fn parse_ftio_txt(text: &str) -> Result<Vec<JobEvent>> {
    const F: Format = Format::FtioTxt;
    let mut cols = BTreeMap::new();
    for (n, line) in non_comment_lines(text) {
        let Some((key, value)) = line.split_once(':') else {
            return Err(parse_err(
                F,
                n,
                format!(
                    "expected `key: value` or `key: [v, v, ...]`, found {:?}",
                    truncate(line)
                ),
            ));
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(parse_err(F, n, format!("{key:?} is not a field name")));
        }
        let value = value.trim();
        let Some(list) = value.strip_prefix('[') else {
            continue; // hostname, pid, total_bytes, ...: not needed
        };
        let Some(list) = list.strip_suffix(']') else {
            return Err(parse_err(F, n, format!("{key}: the list has no closing ]")));
        };
        let values = list
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .enumerate()
            .map(|(i, v)| {
                v.parse::<f64>()
                    .map_err(|_| parse_err(F, n, format!("{key}[{i}] = {v:?} is not a number")))
            })
            .collect::<Result<Vec<f64>>>()?;
        cols.insert(key.to_string(), Column { line: n, values });
    }
    if cols.is_empty() {
        return Ok(Vec::new());
    }
    requests(F, &cols, Direction::Unspecified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_outside_strings_becomes_null() {
        assert_eq!(
            nan_to_null(r#"{"a": [1, NaN], "NaN": "x NaN"}"#),
            r#"{"a": [1, null], "NaN": "x NaN"}"#
        );
    }
}
