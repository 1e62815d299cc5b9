//! TMIO's MessagePack trace (`FILE_FORMAT 2`: `<ranks>.msgpack`), read with `rmp-serde`.
//!
//! The file is a stream of top-level MessagePack arrays, five per flush (TMIO's
//! `ioprint.cxx`, `Binary`): `read_async`, `read_sync`, `write_async`, `write_sync` and
//! `io_time`. An I/O record (TMIO's `statistics::msgpack_pack`) is an array of 14 values:
//!
//! `[mode, flag_req, w_or_r, agg_bytes, max_bytes, max_bytes_phase, max_phases, agg_phases,
//! max_ops, max_ops_rank, agg_ops, procs_io, procs, phases]`
//!
//! where `mode` is `"read_sync"`, `"read_async"`, `"write_sync"` or `"write_async"` and each
//! phase (TMIO's `collect`, one rank's I/O phase) is
//! `[data, t_start, t_end_act, t_end_req, T_sum, T_avr, B_sum, B_avr, n_op]`: `data` bytes
//! moved from `t_start` to `t_end_act` seconds. The `io_time` record (first value a string
//! containing `time`) holds only totals and is skipped. Flushes append: the phases of every
//! flush are the trace.

use std::io::Cursor;

use iosets_types::JobId;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::event::{Direction, JobEvent};
use crate::trace::{event, Format};

const F: Format = Format::TmioMsgpack;

/// The events of a TMIO MessagePack stream.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<JobEvent>> {
    let mut de = rmp_serde::Deserializer::new(Cursor::new(bytes));
    let mut out = Vec::new();
    let mut record = 0;
    loop {
        let offset = usize::try_from(de.position()).unwrap_or(usize::MAX);
        if offset >= bytes.len() {
            break;
        }
        record += 1;
        let err = |message: String| Error::Decode {
            format: F,
            record,
            offset,
            message,
        };
        let v = Value::deserialize(&mut de)
            .map_err(|e| err(format!("not a MessagePack value ({e})")))?;
        let Some(a) = v.as_array() else {
            return Err(err(format!(
                "expected a TMIO record (an array), found {}",
                kind(&v)
            )));
        };
        let Some(mode) = a.first().and_then(Value::as_str) else {
            return Err(err(
                "a TMIO record starts with its mode (read_sync, write_async, io_time, ...)".into(),
            ));
        };
        if mode.contains("time") {
            continue;
        }
        let dir = match mode {
            "read_sync" | "read_async" => Direction::Read,
            "write_sync" | "write_async" => Direction::Write,
            _ => {
                return Err(err(format!(
                    "unknown mode {mode:?}: expected read_sync, read_async, write_sync, \
                     write_async or io_time"
                )))
            }
        };
        if a.len() != 14 {
            return Err(err(format!(
                "a {mode} record has 14 values, this one {}",
                a.len()
            )));
        }
        let Some(phases) = a[13].as_array() else {
            return Err(err(format!(
                "{mode}: value 14 (the phases) is not an array"
            )));
        };
        for (i, p) in phases.iter().enumerate() {
            let Some(p) = p.as_array().filter(|p| p.len() == 9) else {
                return Err(err(format!(
                    "{mode}: phase {i} is not [data, t_start, t_end_act, t_end_req, T_sum, \
                     T_avr, B_sum, B_avr, n_op]"
                )));
            };
            let num = |j: usize, what: &str| {
                p[j].as_f64().ok_or_else(|| {
                    err(format!(
                        "{mode}: phase {i}: {what} {} is not a number",
                        p[j]
                    ))
                })
            };
            let data = num(0, "data")?;
            if !(data.is_finite() && data >= 0.0) {
                return Err(err(format!(
                    "{mode}: phase {i}: data {data} is not a byte count ≥ 0"
                )));
            }
            let (s, e) = (num(1, "t_start")?, num(2, "t_end_act")?);
            let ev = event(F, record, s, e, data.min(u64::MAX as f64) as u64)
                .map_err(|e| err(format!("{mode}: phase {i}: {}", strip(&e))))?;
            out.push(JobEvent {
                job: JobId(0),
                event: ev,
                dir,
            });
        }
    }
    Ok(out)
}

/// A reader error's message without its `format trace, line N:` prefix.
fn strip(e: &Error) -> String {
    match e {
        Error::Parse { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// What kind of MessagePack value `v` is, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nil",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a map",
    }
}
